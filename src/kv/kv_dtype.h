// Element types of the paged KV cache. F32 is exact; F16 halves memory and
// is the default (K/V values are O(1)-scaled activations, well inside fp16).
// Quantized types (q8_0, fp8) plug in here later with per-block scales.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tokenmill::kv {

enum class KvDtype { F32, F16 };

int64_t kv_dtype_bytes(KvDtype dtype);
std::string_view kv_dtype_name(KvDtype dtype);
std::optional<KvDtype> kv_dtype_from_name(std::string_view name);  // "f32", "f16"

}  // namespace tokenmill::kv
