// Reader of the safetensors format (Hugging Face checkpoints): an 8-byte
// little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
// {string: string}}, then the data section the offsets are relative to.
// Tensors are used in place from the memory map.
//
// Everything is validated once, on open: the header length against the
// file, the JSON, each entry's fields, its dtype, that its byte range lies
// inside the data section and matches its shape, and that no two ranges
// overlap. Any violation throws tokenmill::Error naming the file and the
// problem; nothing aborts. Thread-safety: immutable after open.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/mapped_file.h"

namespace tokenmill::quant {

// The safetensors spec caps the JSON header at 100 MB; a larger length is
// a corrupt (or hostile) file, refused before anything is allocated.
inline constexpr uint64_t kMaxSafetensorsHeader = 100u * 1000u * 1000u;

struct SafetensorsTensor {
  std::string name;
  std::string dtype;          // as written: "F16", "I32", "BF16" ...
  int64_t element_bytes = 0;  // of dtype (1 for BOOL and the 8-bit types)
  std::vector<int64_t> shape;
  std::span<const uint8_t> data;  // exactly num_elements() * element_bytes

  int64_t num_elements() const;
  std::string shape_string() const;  // "[32, 4096]"
};

class SafetensorsFile {
 public:
  // Maps and parses the file at path.
  static SafetensorsFile open(const std::string& path);
  // Parses bytes the caller keeps alive for the object's lifetime (fuzzing,
  // tests); `name` appears in error messages.
  static SafetensorsFile parse(std::span<const uint8_t> bytes, const std::string& name);

  SafetensorsFile(SafetensorsFile&&) = default;
  SafetensorsFile& operator=(SafetensorsFile&&) = default;

  const std::string& name() const { return name_; }
  // In order of their data offsets.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;  // nullptr when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  void parse_all();

  std::string name_;
  MappedFile map_;  // empty when parsing caller-owned bytes
  std::span<const uint8_t> bytes_;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Bytes per element of a safetensors dtype name; 0 when unknown.
int64_t safetensors_dtype_bytes(std::string_view dtype);

}  // namespace tokenmill::quant
