#include "gguf/writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "util/error.h"

namespace tokenmill::gguf {
namespace {

constexpr uint32_t kVersion = 3;
constexpr size_t kWriteBufferBytes = size_t{1} << 20;

template <typename T>
void put(std::vector<uint8_t>& out, T value) {
  static_assert(std::is_trivially_copyable_v<T>);
  size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void pad_to(std::vector<uint8_t>& out, uint64_t alignment) {
  out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
}

uint64_t align_up(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// Whether the variant holds the alternative the type needs, in range.
bool holds_valid(const Value& v) {
  auto unsigned_max = [&](uint64_t max) {
    return std::holds_alternative<uint64_t>(v.data) && std::get<uint64_t>(v.data) <= max;
  };
  auto signed_range = [&](int64_t min, int64_t max) {
    if (!std::holds_alternative<int64_t>(v.data)) return false;
    int64_t x = std::get<int64_t>(v.data);
    return x >= min && x <= max;
  };
  switch (v.type) {
    case ValueType::UINT8: return unsigned_max(UINT8_MAX);
    case ValueType::UINT16: return unsigned_max(UINT16_MAX);
    case ValueType::UINT32: return unsigned_max(UINT32_MAX);
    case ValueType::UINT64: return unsigned_max(UINT64_MAX);
    case ValueType::BOOL: return unsigned_max(1);
    case ValueType::INT8: return signed_range(INT8_MIN, INT8_MAX);
    case ValueType::INT16: return signed_range(INT16_MIN, INT16_MAX);
    case ValueType::INT32: return signed_range(INT32_MIN, INT32_MAX);
    case ValueType::INT64: return signed_range(INT64_MIN, INT64_MAX);
    case ValueType::FLOAT32:
    case ValueType::FLOAT64: return std::holds_alternative<double>(v.data);
    case ValueType::STRING: return std::holds_alternative<std::string>(v.data);
    case ValueType::ARRAY: return std::holds_alternative<Array>(v.data);
  }
  return false;
}

void check_value(const std::string& key, const Value& v, int depth) {
  if (!holds_valid(v)) {
    fail("GGUF writer: metadata key '{}' holds a value that is not a valid {}", key, value_type_name(v.type));
  }
  if (!v.is_array()) return;
  if (depth >= kMaxArrayDepth) fail("GGUF writer: metadata key '{}' nests arrays too deep", key);
  const Array& a = v.as_array();
  for (size_t i = 0; i < a.items.size(); ++i) {
    if (a.items[i].type != a.element_type) {
      fail("GGUF writer: metadata key '{}' array item {} has type {}, but the array holds {}", key, i,
           value_type_name(a.items[i].type), value_type_name(a.element_type));
    }
    check_value(key, a.items[i], depth + 1);
  }
}

void put_value(std::vector<uint8_t>& out, const Value& v) {
  switch (v.type) {
    case ValueType::UINT8:
    case ValueType::BOOL: put<uint8_t>(out, static_cast<uint8_t>(std::get<uint64_t>(v.data))); break;
    case ValueType::UINT16: put<uint16_t>(out, static_cast<uint16_t>(std::get<uint64_t>(v.data))); break;
    case ValueType::UINT32: put<uint32_t>(out, static_cast<uint32_t>(std::get<uint64_t>(v.data))); break;
    case ValueType::UINT64: put<uint64_t>(out, std::get<uint64_t>(v.data)); break;
    case ValueType::INT8: put<int8_t>(out, static_cast<int8_t>(std::get<int64_t>(v.data))); break;
    case ValueType::INT16: put<int16_t>(out, static_cast<int16_t>(std::get<int64_t>(v.data))); break;
    case ValueType::INT32: put<int32_t>(out, static_cast<int32_t>(std::get<int64_t>(v.data))); break;
    case ValueType::INT64: put<int64_t>(out, std::get<int64_t>(v.data)); break;
    case ValueType::FLOAT32: put<float>(out, static_cast<float>(std::get<double>(v.data))); break;
    case ValueType::FLOAT64: put<double>(out, std::get<double>(v.data)); break;
    case ValueType::STRING: put_string(out, v.as_string()); break;
    case ValueType::ARRAY: {
      const Array& a = v.as_array();
      put<uint32_t>(out, static_cast<uint32_t>(a.element_type));
      put<uint64_t>(out, a.items.size());
      for (const Value& item : a.items) put_value(out, item);  // items carry no type tag
      break;
    }
  }
}

// Closes and deletes the temporary file unless released; keeps write()'s
// error paths from leaking the handle or leaving the partial file behind.
struct TempFile {
  std::string path;
  std::FILE* file = nullptr;
  bool keep = false;
  ~TempFile() {
    if (file != nullptr) std::fclose(file);
    if (!keep) std::remove(path.c_str());
  }
};

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    fail("GGUF writer: alignment {} is not a non-zero power of two", alignment);
  }
}

const Value* GgufWriter::find(std::string_view key) const {
  for (const MetadataEntry& e : metadata_) {
    if (e.key == key) return &e.value;
  }
  return nullptr;
}

void GgufWriter::set(const std::string& key, Value value) {
  check_value(key, value, 0);
  for (MetadataEntry& e : metadata_) {
    if (e.key == key) {
      e.value = std::move(value);
      return;
    }
  }
  metadata_.push_back({key, std::move(value)});
}

void GgufWriter::add_tensor(const std::string& name, TensorType type, std::vector<int64_t> dims,
                            std::vector<uint8_t> data) {
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) fail("GGUF writer: duplicate tensor name '{}'", name);
  }
  if (dims.empty() || dims.size() > static_cast<size_t>(kMaxDims)) {
    fail("GGUF writer: tensor '{}' has {} dimensions (must be 1 to {})", name, dims.size(), kMaxDims);
  }
  const TensorTypeInfo& info = tensor_type_info(type);
  int64_t rows = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] < 1) fail("GGUF writer: tensor '{}' dimension {} is {}", name, d, dims[d]);
    if (d > 0 && __builtin_mul_overflow(rows, dims[d], &rows)) {
      fail("GGUF writer: tensor '{}' is too large", name);
    }
  }
  if (dims[0] % info.block_size != 0) {
    fail("GGUF writer: tensor '{}' row length {} is not a multiple of the {} block size {}", name, dims[0], info.name,
         info.block_size);
  }
  int64_t expected = 0;
  if (__builtin_mul_overflow(row_bytes(type, dims[0]), rows, &expected)) {
    fail("GGUF writer: tensor '{}' is too large", name);
  }
  if (data.size() != static_cast<uint64_t>(expected)) {
    fail("GGUF writer: tensor '{}' has {} bytes of data, expected {}", name, data.size(), expected);
  }
  tensors_.push_back({name, type, std::move(dims), std::move(data)});
}

std::vector<uint8_t> GgufWriter::encode_header() const {
  // general.alignment must match the padding actually used: an entry the
  // caller set is overwritten, and one is added first when not the default.
  bool has_alignment_key = false;
  for (const MetadataEntry& e : metadata_) has_alignment_key |= e.key == "general.alignment";
  bool add_alignment_key = !has_alignment_key && alignment_ != kDefaultAlignment;
  std::vector<uint8_t> out;
  put<uint32_t>(out, kMagic);
  put<uint32_t>(out, kVersion);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, metadata_.size() + (add_alignment_key ? 1 : 0));
  if (add_alignment_key) {
    put_string(out, "general.alignment");
    put<uint32_t>(out, static_cast<uint32_t>(ValueType::UINT32));
    put_value(out, Value::u32(alignment_));
  }
  for (const MetadataEntry& e : metadata_) {
    put_string(out, e.key);
    Value forced = Value::u32(alignment_);
    const Value& v = e.key == "general.alignment" ? forced : e.value;
    put<uint32_t>(out, static_cast<uint32_t>(v.type));
    put_value(out, v);
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) put<uint64_t>(out, static_cast<uint64_t>(d));
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, offset);
    offset += align_up(t.data.size(), alignment_);
  }
  pad_to(out, alignment_);
  return out;
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out = encode_header();
  for (const PendingTensor& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    pad_to(out, alignment_);
  }
  return out;
}

void GgufWriter::write(const std::string& path) const {
  TempFile tmp{path + ".tmp"};
  tmp.file = std::fopen(tmp.path.c_str(), "wb");
  if (tmp.file == nullptr) fail("cannot create '{}': {}", tmp.path, std::strerror(errno));
  std::setvbuf(tmp.file, nullptr, _IOFBF, kWriteBufferBytes);
  auto write_bytes = [&](const uint8_t* p, size_t n) {
    if (n > 0 && std::fwrite(p, 1, n, tmp.file) != n) {
      fail("cannot write '{}': {}", tmp.path, std::strerror(errno));
    }
  };
  std::vector<uint8_t> header = encode_header();
  write_bytes(header.data(), header.size());
  static constexpr uint8_t kZeros[4096] = {};
  for (const PendingTensor& t : tensors_) {
    write_bytes(t.data.data(), t.data.size());
    for (uint64_t pad = align_up(t.data.size(), alignment_) - t.data.size(); pad > 0;) {
      size_t n = std::min<uint64_t>(pad, sizeof(kZeros));
      write_bytes(kZeros, n);
      pad -= n;
    }
  }
  std::FILE* file = std::exchange(tmp.file, nullptr);
  if (std::fclose(file) != 0) fail("cannot write '{}': {}", tmp.path, std::strerror(errno));
  if (std::rename(tmp.path.c_str(), path.c_str()) != 0) {
    fail("cannot rename '{}' to '{}': {}", tmp.path, path, std::strerror(errno));
  }
  tmp.keep = true;
}

}  // namespace tokenmill::gguf
