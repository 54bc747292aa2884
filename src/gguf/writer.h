// GGUF writer (version 3). Collects metadata and tensors in memory order and
// writes the file atomically: to PATH.tmp, then renamed, so a failure never
// leaves a partial file under the target name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"

namespace tokenmill::gguf {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = kDefaultAlignment);

  // Adds or replaces a metadata key (order of first insertion is kept).
  void set(const std::string& key, Value value);
  // The value set for `key`, or nullptr.
  const Value* find(std::string_view key) const;
  // Adds a tensor; `data` must hold exactly row_bytes(type, dims[0]) * rows
  // bytes. dims are in GGUF order (dims[0] fastest). Throws Error on a
  // duplicate name or a size mismatch.
  void add_tensor(const std::string& name, TensorType type, std::vector<int64_t> dims, std::vector<uint8_t> data);

  // Writes the file; throws Error (and removes the temporary) on failure.
  void write(const std::string& path) const;
  // The exact bytes write() would produce.
  std::vector<uint8_t> to_bytes() const;

 private:
  struct PendingTensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;
  };
  // Magic through tensor infos, padded to the start of the data section.
  std::vector<uint8_t> encode_header() const;

  uint32_t alignment_;
  std::vector<MetadataEntry> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace tokenmill::gguf
