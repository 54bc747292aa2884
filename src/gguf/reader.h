// GGUF file reader (format versions 2 and 3). Parses the header, metadata and
// tensor infos eagerly and validates everything against the file size; tensor
// data stays in the memory map and is used in place.
//
// Every malformed input throws tokenmill::Error with the file name and the
// problem (bad magic, unknown version, truncation, offsets outside the file,
// dimension overflow, unknown tensor type, duplicate names ...). Never aborts.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/tensor_type.h"
#include "gguf/value.h"
#include "util/mapped_file.h"

namespace tokenmill::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;

struct TensorInfo {
  std::string name;
  TensorType type = TensorType::F32;
  // GGUF order: dims[0] is the fastest-varying (row length). Unused dims are 1.
  int64_t dims[kMaxDims] = {1, 1, 1, 1};
  uint32_t num_dims = 0;
  uint64_t offset = 0;            // relative to the start of the data section
  uint64_t num_bytes = 0;         // exact size of the data
  const uint8_t* data = nullptr;  // into the file's bytes

  int64_t num_elements() const { return dims[0] * dims[1] * dims[2] * dims[3]; }
  int64_t row_length() const { return dims[0]; }
  int64_t num_rows() const { return dims[1] * dims[2] * dims[3]; }
  std::string shape_string() const;  // "[2048, 32000]"
};

struct MetadataEntry {
  std::string key;
  Value value;
};

class GgufFile {
 public:
  // Maps and parses the file at path.
  static GgufFile open(const std::string& path);
  // Parses bytes that the caller keeps alive for the object's lifetime
  // (fuzzing, tests). `name` appears in error messages.
  static GgufFile parse(std::span<const uint8_t> bytes, const std::string& name);

  GgufFile(GgufFile&&) = default;
  GgufFile& operator=(GgufFile&&) = default;

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t file_size() const { return bytes_.size(); }
  uint64_t data_offset() const { return data_offset_; }

  // Metadata, in file order.
  const std::vector<MetadataEntry>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;  // nullptr when absent
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters: throw Error naming the file and key when the key is
  // missing or has an incompatible type. The *_or forms return the fallback
  // when the key is absent (but still throw on a wrong type).
  std::string get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;   // any integer type
  double get_float(std::string_view key) const;  // float or integer types
  bool get_bool(std::string_view key) const;
  const Array& get_array(std::string_view key) const;
  std::string get_string_or(std::string_view key, std::string fallback) const;
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  double get_float_or(std::string_view key, double fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent
  const TensorInfo& tensor(std::string_view name) const;       // throws Error when absent

 private:
  GgufFile() = default;
  void parse_all();

  std::string name_;
  MappedFile map_;  // empty when parsing caller-owned bytes
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<MetadataEntry> metadata_;
  std::unordered_map<std::string, size_t> metadata_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace tokenmill::gguf
