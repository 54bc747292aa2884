// Tensor element types as numbered in GGUF (ggml_type), with their block
// geometry. Knows nothing about how to compute with them (that is kernels/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tokenmill::gguf {

enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  BF16 = 30,
};

// Every TensorType's id is below this (for tables indexed by type id).
inline constexpr size_t kTensorTypeIdLimit = 31;

struct TensorTypeInfo {
  TensorType type;
  std::string_view name;    // as GGUF tools print it: "Q4_K", "F16"
  int64_t block_size;       // elements per block
  int64_t bytes_per_block;  // bytes per block
};

// Info for a type id read from a file; nullopt for ids tokenmill cannot handle.
std::optional<TensorTypeInfo> tensor_type_info(uint32_t id);
// Info for a known type (never fails).
const TensorTypeInfo& tensor_type_info(TensorType type);
// Parses a name such as "q4_k" or "F16" (case-insensitive); nullopt if unknown.
std::optional<TensorType> tensor_type_from_name(std::string_view name);
std::string_view tensor_type_name(TensorType type);

// Bytes taken by a row of n elements; n must be a multiple of the block size.
int64_t row_bytes(TensorType type, int64_t n);

}  // namespace tokenmill::gguf
