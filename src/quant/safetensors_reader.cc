#include "quant/safetensors_reader.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace tokenmill::quant {
namespace {

using Json = nlohmann::json;

struct SafetensorsDtypeInfo {
  std::string_view name;
  int64_t bytes;
};

constexpr std::array<SafetensorsDtypeInfo, 15> kSafetensorsDtypes = {{
    {"BOOL", 1},
    {"U8", 1},
    {"I8", 1},
    {"F8_E4M3", 1},
    {"F8_E5M2", 1},
    {"U16", 2},
    {"I16", 2},
    {"F16", 2},
    {"BF16", 2},
    {"U32", 4},
    {"I32", 4},
    {"F32", 4},
    {"U64", 8},
    {"I64", 8},
    {"F64", 8},
}};

// A JSON number that is a non-negative integer below 2^62 (so that sums and
// products checked below cannot wrap before the check).
bool read_json_count(const Json& v, uint64_t& out) {
  if (!v.is_number_unsigned()) return false;
  out = v.get<uint64_t>();
  return out < (uint64_t{1} << 62);
}

std::vector<int64_t> read_safetensors_shape(const std::string& file, const std::string& name, const Json& shape) {
  if (!shape.is_array()) fail("{}: tensor '{}': \"shape\" is not an array", file, name);
  if (shape.size() > 8) fail("{}: tensor '{}': {} dimensions (at most 8 supported)", file, name, shape.size());
  std::vector<int64_t> dims;
  for (const Json& d : shape) {
    uint64_t n = 0;
    if (!read_json_count(d, n))
      fail("{}: tensor '{}': shape entry {} is not a non-negative integer", file, name, d.dump());
    dims.push_back(static_cast<int64_t>(n));
  }
  return dims;
}

// Bytes the shape takes; throws when the product overflows.
uint64_t safetensors_shape_bytes(const std::string& file, const std::string& name, const std::vector<int64_t>& dims,
                                 int64_t element_bytes) {
  uint64_t total = static_cast<uint64_t>(element_bytes);
  for (int64_t d : dims) {
    if (__builtin_mul_overflow(total, static_cast<uint64_t>(d), &total) || total >= (uint64_t{1} << 62)) {
      fail("{}: tensor '{}': shape is too large", file, name);
    }
  }
  return total;
}

SafetensorsTensor read_safetensors_entry(const std::string& file, const std::string& name, const Json& e,
                                         std::span<const uint8_t> data) {
  if (!e.is_object()) fail("{}: tensor '{}': entry is not a JSON object", file, name);
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!e.contains(key)) fail("{}: tensor '{}': missing \"{}\"", file, name, key);
  }
  SafetensorsTensor t;
  t.name = name;
  if (!e["dtype"].is_string()) fail("{}: tensor '{}': \"dtype\" is not a string", file, name);
  t.dtype = e["dtype"].get<std::string>();
  t.element_bytes = safetensors_dtype_bytes(t.dtype);
  if (t.element_bytes == 0) fail("{}: tensor '{}': unknown dtype '{}'", file, name, t.dtype);
  t.shape = read_safetensors_shape(file, name, e["shape"]);
  const Json& off = e["data_offsets"];
  uint64_t begin = 0, end = 0;
  if (!off.is_array() || off.size() != 2 || !read_json_count(off[0], begin) || !read_json_count(off[1], end)) {
    fail("{}: tensor '{}': \"data_offsets\" must be two non-negative integers [begin, end]", file, name);
  }
  if (begin > end || end > data.size()) {
    fail("{}: tensor '{}': data_offsets [{}, {}] out of range (data section holds {} bytes)", file, name, begin, end,
         data.size());
  }
  const uint64_t want = safetensors_shape_bytes(file, name, t.shape, t.element_bytes);
  if (end - begin != want) {
    fail("{}: tensor '{}': data_offsets [{}, {}] hold {} bytes, but {} {} needs {}", file, name, begin, end,
         end - begin, t.dtype, t.shape_string(), want);
  }
  t.data = data.subspan(begin, end - begin);
  return t;
}

}  // namespace

int64_t safetensors_dtype_bytes(std::string_view dtype) {
  for (const SafetensorsDtypeInfo& d : kSafetensorsDtypes) {
    if (d.name == dtype) return d.bytes;
  }
  return 0;
}

int64_t SafetensorsTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string SafetensorsTensor::shape_string() const {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return out + "]";
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.name_ = path;
  f.map_ = MappedFile::open(path);
  f.bytes_ = f.map_.bytes();
  f.parse_all();
  return f;
}

SafetensorsFile SafetensorsFile::parse(std::span<const uint8_t> bytes, const std::string& name) {
  SafetensorsFile f;
  f.name_ = name;
  f.bytes_ = bytes;
  f.parse_all();
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::parse_all() {
  if (bytes_.size() < 8)
    fail("{}: not a safetensors file ({} bytes, shorter than the 8-byte header length)", name_, bytes_.size());
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes_.data(), 8);  // little-endian host
  if (header_len > kMaxSafetensorsHeader || header_len > bytes_.size() - 8) {
    fail("{}: bad header length {} (the file holds {} bytes after the length; the format's limit is {})", name_,
         header_len, bytes_.size() - 8, kMaxSafetensorsHeader);
  }
  const auto* text = reinterpret_cast<const char*>(bytes_.data() + 8);
  const Json header = Json::parse(text, text + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) fail("{}: the header is not valid JSON", name_);
  if (!header.is_object()) fail("{}: the header is not a JSON object", name_);
  const std::span<const uint8_t> data = bytes_.subspan(8 + header_len);
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail("{}: \"__metadata__\" is not a JSON object", name_);
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) fail("{}: \"__metadata__\" entry '{}' is not a string", name_, mk);
        metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    tensors_.push_back(read_safetensors_entry(name_, key, value, data));
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.data.data() < b.data.data(); });
  // Sorted by start, a range overlaps an earlier one exactly when it starts
  // before the furthest end so far. Empty tensors take no bytes.
  const SafetensorsTensor* furthest = nullptr;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const SafetensorsTensor& t = tensors_[i];
    if (!t.data.empty()) {
      if (furthest != nullptr && furthest->data.data() + furthest->data.size() > t.data.data()) {
        fail("{}: the data of tensors '{}' and '{}' overlap", name_, furthest->name, t.name);
      }
      if (furthest == nullptr || t.data.data() + t.data.size() > furthest->data.data() + furthest->data.size()) {
        furthest = &t;
      }
    }
    index_.emplace(tensors_[i].name, i);
  }
}

}  // namespace tokenmill::quant
