#include "gguf/reader.h"

#include <fmt/format.h>

#include <bit>
#include <limits>
#include <utility>

#include "gguf/byte_cursor.h"
#include "util/error.h"

namespace tokenmill::gguf {
namespace {

// Smallest possible encodings, used to reject counts that cannot fit in the
// bytes left before anything is allocated for them.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;                  // empty key, type, uint8
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim

constexpr uint32_t kNumValueTypes = 13;

uint64_t min_encoded_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL: return 1;
    case ValueType::UINT16:
    case ValueType::INT16: return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32: return 4;
    case ValueType::STRING:  // uint64 length
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64: return 8;
    case ValueType::ARRAY: return 4 + 8;  // element type, length
  }
  return 1;
}

ValueType read_value_type(ByteCursor& c, const char* what) {
  uint64_t at = c.pos();
  uint32_t id = c.read<uint32_t>(what);
  if (id >= kNumValueTypes) {
    fail("{}: unknown {} {} at offset {} in {}", c.name(), what, id, at, c.context());
  }
  return static_cast<ValueType>(id);
}

Array read_array(ByteCursor& c, int depth);

Value read_value(ByteCursor& c, ValueType t, int depth) {
  switch (t) {
    case ValueType::UINT8: return {t, uint64_t{c.read<uint8_t>("uint8 value")}};
    case ValueType::INT8: return {t, int64_t{c.read<int8_t>("int8 value")}};
    case ValueType::UINT16: return {t, uint64_t{c.read<uint16_t>("uint16 value")}};
    case ValueType::INT16: return {t, int64_t{c.read<int16_t>("int16 value")}};
    case ValueType::UINT32: return {t, uint64_t{c.read<uint32_t>("uint32 value")}};
    case ValueType::INT32: return {t, int64_t{c.read<int32_t>("int32 value")}};
    case ValueType::UINT64: return {t, c.read<uint64_t>("uint64 value")};
    case ValueType::INT64: return {t, c.read<int64_t>("int64 value")};
    case ValueType::FLOAT32: return {t, double{c.read<float>("float32 value")}};
    case ValueType::FLOAT64: return {t, c.read<double>("float64 value")};
    case ValueType::BOOL: {
      uint64_t at = c.pos();
      uint8_t b = c.read<uint8_t>("bool value");
      if (b > 1) fail("{}: invalid bool value {} at offset {} in {}", c.name(), b, at, c.context());
      return {t, uint64_t{b}};
    }
    case ValueType::STRING: return {t, c.read_string("string")};
    case ValueType::ARRAY: return {t, read_array(c, depth + 1)};
  }
  fail("{}: unknown value type in {}", c.name(), c.context());
}

Array read_array(ByteCursor& c, int depth) {
  if (depth > kMaxArrayDepth) {
    fail("{}: arrays nested more than {} deep at offset {} in {}", c.name(), kMaxArrayDepth, c.pos(), c.context());
  }
  Array array;
  array.element_type = read_value_type(c, "array element type");
  uint64_t at = c.pos();
  uint64_t count = c.read<uint64_t>("array length");
  if (count > c.remaining() / min_encoded_size(array.element_type)) {
    fail("{}: array of {} {} items at offset {} in {} cannot fit in the {} bytes left", c.name(), count,
         value_type_name(array.element_type), at, c.context(), c.remaining());
  }
  array.items.reserve(count);
  for (uint64_t i = 0; i < count; ++i) array.items.push_back(read_value(c, array.element_type, depth));
  return array;
}

struct Header {
  uint32_t version = 0;
  uint64_t tensor_count = 0;
  uint64_t kv_count = 0;
};

void check_magic(ByteCursor& c) {
  if (c.size() < 4) fail("{}: file is too small to be GGUF ({} bytes)", c.name(), c.size());
  uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic) {
    fail("{}: not a GGUF file (magic bytes {:02x} {:02x} {:02x} {:02x}, expected 47 47 55 46 \"GGUF\")", c.name(),
         magic & 0xff, (magic >> 8) & 0xff, (magic >> 16) & 0xff, magic >> 24);
  }
}

Header read_header(ByteCursor& c) {
  check_magic(c);
  Header h;
  h.version = c.read<uint32_t>("version");
  if (h.version == 1) {
    fail(
        "{}: GGUF version 1 is not supported (only versions 2 and 3); convert the model again "
        "with a current tool",
        c.name());
  }
  if (h.version != 2 && h.version != 3) {
    uint32_t swapped = __builtin_bswap32(h.version);
    if (swapped >= 1 && swapped <= 3) {
      fail(
          "{}: GGUF version field reads 0x{:08x}: the file looks big-endian, and only "
          "little-endian GGUF files are supported",
          c.name(), h.version);
    }
    fail("{}: unsupported GGUF version {} (only versions 2 and 3)", c.name(), h.version);
  }
  h.tensor_count = c.read<uint64_t>("tensor count");
  h.kv_count = c.read<uint64_t>("metadata count");
  if (h.tensor_count > c.remaining() / kMinTensorInfoBytes) {
    fail("{}: tensor count {} cannot fit in the file ({} bytes)", c.name(), h.tensor_count, c.size());
  }
  if (h.kv_count > c.remaining() / kMinKvBytes) {
    fail("{}: metadata count {} cannot fit in the file ({} bytes)", c.name(), h.kv_count, c.size());
  }
  return h;
}

void read_metadata(ByteCursor& c, uint64_t count, std::vector<MetadataEntry>& entries,
                   std::unordered_map<std::string, size_t>& index) {
  entries.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    c.set_context(fmt::format("metadata entry {}", i));
    std::string key = c.read_string("key");
    if (index.contains(key)) fail("{}: duplicate metadata key '{}'", c.name(), key);
    c.set_context(fmt::format("metadata key '{}'", key));
    ValueType type = read_value_type(c, "value type");
    Value value = read_value(c, type, 0);
    index.emplace(key, entries.size());
    entries.push_back({std::move(key), std::move(value)});
  }
  c.set_context("");
}

std::string_view type_description(const Value& v) { return v.is_array() ? "array" : value_type_name(v.type); }

[[noreturn]] void wrong_type(const std::string& file, std::string_view key, const Value& v, const char* expected) {
  fail("{}: metadata key '{}' has type {}, expected {}", file, key, type_description(v), expected);
}

int64_t int_of(const std::string& file, std::string_view key, const Value& v) {
  if (!v.is_integer()) wrong_type(file, key, v, "an integer");
  if (v.type == ValueType::UINT64 &&
      std::get<uint64_t>(v.data) > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    fail("{}: metadata key '{}' value {} does not fit a signed 64-bit integer", file, key, std::get<uint64_t>(v.data));
  }
  return v.as_int();
}

uint32_t alignment_of(const std::string& file, const Value* v) {
  if (v == nullptr) return kDefaultAlignment;
  if (!v->is_integer()) wrong_type(file, "general.alignment", *v, "an integer");
  bool negative = !std::holds_alternative<uint64_t>(v->data) && std::get<int64_t>(v->data) < 0;
  uint64_t a = negative                                    ? 0
               : std::holds_alternative<uint64_t>(v->data) ? std::get<uint64_t>(v->data)
                                                           : static_cast<uint64_t>(std::get<int64_t>(v->data));
  if (negative || a == 0 || !std::has_single_bit(a) || a > std::numeric_limits<uint32_t>::max()) {
    fail("{}: general.alignment {} is not a power of two between 1 and 2^31", file, v->to_display_string());
  }
  return static_cast<uint32_t>(a);
}

// Reads dims and type and computes the exact byte size, rejecting anything
// whose element or byte count overflows 64 bits.
void read_shape_and_type(ByteCursor& c, TensorInfo& t) {
  t.num_dims = c.read<uint32_t>("dimension count");
  if (t.num_dims < 1 || t.num_dims > kMaxDims) {
    fail("{}: tensor '{}' has {} dimensions (must be 1 to {})", c.name(), t.name, t.num_dims, kMaxDims);
  }
  int64_t elements = 1;
  for (uint32_t d = 0; d < t.num_dims; ++d) {
    uint64_t dim = c.read<uint64_t>("dimension");
    if (dim == 0) fail("{}: tensor '{}' dimension {} is 0", c.name(), t.name, d);
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(elements, static_cast<int64_t>(dim), &elements)) {
      fail("{}: tensor '{}' element count overflows int64 (dimension {} is {})", c.name(), t.name, d, dim);
    }
    t.dims[d] = static_cast<int64_t>(dim);
  }
  uint64_t at = c.pos();
  uint32_t type_id = c.read<uint32_t>("tensor type");
  std::optional<TensorTypeInfo> info = tensor_type_info(type_id);
  if (!info) fail("{}: tensor '{}' has unknown type id {} at offset {}", c.name(), t.name, type_id, at);
  t.type = info->type;
  if (t.dims[0] % info->block_size != 0) {
    fail("{}: tensor '{}' row length {} is not a multiple of the {} block size {}", c.name(), t.name, t.dims[0],
         info->name, info->block_size);
  }
  uint64_t blocks = static_cast<uint64_t>(elements / info->block_size);
  if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(info->bytes_per_block), &t.num_bytes)) {
    fail("{}: tensor '{}' byte size overflows 64 bits", c.name(), t.name);
  }
}

TensorInfo read_tensor_info(ByteCursor& c, uint32_t alignment) {
  TensorInfo t;
  t.name = c.read_string("tensor name");
  c.set_context(fmt::format("tensor '{}'", t.name));
  read_shape_and_type(c, t);
  t.offset = c.read<uint64_t>("tensor data offset");
  if (t.offset % alignment != 0) {
    fail("{}: tensor '{}' data offset {} is not a multiple of the alignment {}", c.name(), t.name, t.offset, alignment);
  }
  return t;
}

}  // namespace

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (uint32_t d = 0; d < num_dims; ++d) s += fmt::format("{}{}", d > 0 ? ", " : "", dims[d]);
  return s + "]";
}

GgufFile GgufFile::open(const std::string& path) {
  GgufFile file;
  file.name_ = path;
  file.map_ = MappedFile::open(path);
  file.bytes_ = file.map_.bytes();
  file.parse_all();
  return file;
}

GgufFile GgufFile::parse(std::span<const uint8_t> bytes, const std::string& name) {
  GgufFile file;
  file.name_ = name;
  file.bytes_ = bytes;
  file.parse_all();
  return file;
}

void GgufFile::parse_all() {
  ByteCursor c(bytes_, name_);
  Header header = read_header(c);
  version_ = header.version;
  read_metadata(c, header.kv_count, metadata_, metadata_index_);
  alignment_ = alignment_of(name_, find("general.alignment"));
  if (header.tensor_count > c.remaining() / kMinTensorInfoBytes) {
    fail("{}: tensor count {} cannot fit in the {} bytes after the metadata", name_, header.tensor_count,
         c.remaining());
  }
  tensors_.reserve(header.tensor_count);
  for (uint64_t i = 0; i < header.tensor_count; ++i) {
    c.set_context(fmt::format("tensor info {}", i));
    TensorInfo t = read_tensor_info(c, alignment_);
    if (tensor_index_.contains(t.name)) fail("{}: duplicate tensor name '{}'", name_, t.name);
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }
  // The data section starts at the first aligned position after the infos.
  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  uint64_t available = bytes_.size() > data_offset_ ? bytes_.size() - data_offset_ : 0;
  for (TensorInfo& t : tensors_) {
    if (t.offset > available || t.num_bytes > available - t.offset) {
      bool fits = t.offset <= std::numeric_limits<uint64_t>::max() - data_offset_;
      std::string where =
          fits ? fmt::format("{}", data_offset_ + t.offset) : fmt::format("{} + {}", data_offset_, t.offset);
      fail("{}: tensor '{}' data [offset {}, {} bytes] extends past end of file ({} bytes)", name_, t.name, where,
           t.num_bytes, bytes_.size());
    }
    t.data = bytes_.data() + data_offset_ + t.offset;
  }
}

const Value* GgufFile::find(std::string_view key) const {
  auto it = metadata_index_.find(std::string(key));
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& GgufFile::tensor(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  if (t == nullptr) fail("{}: tensor '{}' is missing", name_, name);
  return *t;
}

std::string GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) fail("{}: metadata key '{}' is missing", name_, key);
  return get_string_or(key, "");
}

int64_t GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) fail("{}: metadata key '{}' is missing", name_, key);
  return int_of(name_, key, *v);
}

double GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) fail("{}: metadata key '{}' is missing", name_, key);
  return get_float_or(key, 0.0);
}

bool GgufFile::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) fail("{}: metadata key '{}' is missing", name_, key);
  return get_bool_or(key, false);
}

const Array& GgufFile::get_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) fail("{}: metadata key '{}' is missing", name_, key);
  if (!v->is_array()) wrong_type(name_, key, *v, "an array");
  return v->as_array();
}

std::string GgufFile::get_string_or(std::string_view key, std::string fallback) const {
  const Value* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) wrong_type(name_, key, *v, "a string");
  return v->as_string();
}

int64_t GgufFile::get_int_or(std::string_view key, int64_t fallback) const {
  const Value* v = find(key);
  return v == nullptr ? fallback : int_of(name_, key, *v);
}

double GgufFile::get_float_or(std::string_view key, double fallback) const {
  const Value* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_float() && !v->is_integer()) wrong_type(name_, key, *v, "a number");
  return v->as_float();
}

bool GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  const Value* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_bool()) wrong_type(name_, key, *v, "a bool");
  return v->as_bool();
}

}  // namespace tokenmill::gguf
