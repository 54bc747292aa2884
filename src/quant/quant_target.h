// What `tokenmill quantize --type` can produce: one GGUF tensor type for
// every weight matrix, a per-tensor mixture (Q4_K_M, Q5_K_M), or a weight
// runtime that has no GGUF type of its own and is stored in one that every
// GGUF reader knows:
//   FP8_E4M3: BF16 tensors whose values lie exactly on the FP8 E4M3 grid
//             with a power-of-two scale per 32 weights (kernels/fp8.h);
//             tokenmill packs them to 8-bit codes at load time, losslessly.
//   W8A8:     Q8_0 tensors (after SmoothQuant smoothing when an imatrix with
//             activation maxima is given); tokenmill runs them with per-token
//             INT8 activations and integer dot products.
// Both carry the key tokenmill.weights.runtime ("fp8_e4m3" / "w8a8") so that
// tokenmill picks the runtime at load time; other readers see an ordinary
// BF16 / Q8_0 model that computes the same function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gguf/tensor_type.h"

namespace tokenmill::quant {

enum class Mix { kNone, kQ4_K_M, kQ5_K_M };
enum class WeightRuntime { kDense, kFp8, kW8A8 };

struct QuantTarget {
  std::string name;       // canonical: "Q4_K_M", "FP8_E4M3", "Q8_0"
  gguf::TensorType base;  // the ordinary matrices' type (storage type for FP8/W8A8)
  Mix mix = Mix::kNone;
  WeightRuntime runtime = WeightRuntime::kDense;
  uint32_t file_type = 0;  // general.file_type (llama.cpp's LLAMA_FTYPE numbering)
};

// Case-insensitive: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K
// Q5_K Q6_K Q4_K_M Q5_K_M FP8_E4M3 (or FP8) W8A8. nullopt when unknown.
std::optional<QuantTarget> parse_quant_target(std::string_view name);
// "F32|F16|...|W8A8" for help texts and error messages.
std::string quant_target_choices();

// The metadata key naming the weight runtime, and its values.
inline constexpr std::string_view kRuntimeKey = "tokenmill.weights.runtime";
std::string_view runtime_name(WeightRuntime runtime);  // "dense", "fp8_e4m3", "w8a8"
std::optional<WeightRuntime> runtime_from_name(std::string_view name);

}  // namespace tokenmill::quant
