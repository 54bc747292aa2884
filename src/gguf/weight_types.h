// Which tensor types a model's bytes are stored in: "Q4_K 61 %, Q6_K 29 %,
// F32 ..." says more about a quantized file than general.file_type, which
// converters set inconsistently. Shown by the web console and logged by
// `serve`.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gguf/reader.h"

namespace tokenmill::gguf {

struct TypeShare {
  std::string type;    // tensor_type_name ("Q4_K", "F32", ...)
  uint64_t bytes = 0;  // of tensors of this type
  double share = 0;    // of all tensor bytes, in [0, 1]
};

// One entry per type present, most bytes first (ties by name).
std::vector<TypeShare> weight_type_shares(std::span<const TensorInfo> tensors);

}  // namespace tokenmill::gguf
