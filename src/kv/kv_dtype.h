// Element types of the paged KV cache. F32 is exact; F16 halves memory and
// is the default (K/V values are O(1)-scaled activations, well inside fp16).
//
// Quantized types store each position's K (or V) row of n_kv_dim elements
// as groups of kv_quant_group(n_kv_dim) elements, each group an fp16 scale
// followed by its codes:
//   Q8_0:     x = d * int8            (d = max|x| / 127; GGUF's Q8_0 block when the group is 32)
//   FP8_E4M3: x = d * e4m3(byte)      (d = max|x| / 448)
//   Q4_0:     x = d * (nibble - 8)    (d = m / -8, m the element of largest
//             magnitude, sign kept, so that it is stored exactly as -8;
//             GGUF's Q4_0 block when the group is 32). Byte i of a group of
//             g holds element i in its low nibble and element i + g/2 in
//             its high one; g must be even.
// Rows are quantized when written and dequantized inside the attention
// kernel. A group is 32 elements (several per head for head_dim >= 64, one
// shared by several heads for smaller heads), or the whole row when n_kv_dim
// is not a multiple of 32.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tokenmill::kv {

enum class KvDtype { F32, F16, Q8_0, FP8_E4M3, Q4_0 };

inline constexpr int64_t kKvQuantGroup = 32;

// Whether the dtype stores groups of scaled codes (Q8_0, FP8_E4M3, Q4_0).
inline bool kv_dtype_quantized(KvDtype dtype) {
  return dtype == KvDtype::Q8_0 || dtype == KvDtype::FP8_E4M3 || dtype == KvDtype::Q4_0;
}
// Elements per scale group of a quantized row of n_kv_dim elements.
inline int64_t kv_quant_group(int64_t n_kv_dim) { return n_kv_dim % kKvQuantGroup == 0 ? kKvQuantGroup : n_kv_dim; }
// Bytes of one group of g elements: the fp16 scale, then the codes.
inline int64_t kv_group_bytes(KvDtype dtype, int64_t g) { return 2 + (dtype == KvDtype::Q4_0 ? g / 2 : g); }
// Bytes of one position's K (or V) row, scales included.
// Precondition: n_kv_dim > 0.
inline int64_t kv_row_bytes(KvDtype dtype, int64_t n_kv_dim) {
  switch (dtype) {
    case KvDtype::F32: return 4 * n_kv_dim;
    case KvDtype::F16: return 2 * n_kv_dim;
    case KvDtype::Q8_0:
    case KvDtype::FP8_E4M3:
    case KvDtype::Q4_0: return n_kv_dim / kv_quant_group(n_kv_dim) * kv_group_bytes(dtype, kv_quant_group(n_kv_dim));
  }
  return 0;
}

// Bits of one element's payload (32, 16, 8, or 4; the quantized types'
// per-group scales come on top: use kv_row_bytes for sizes).
int64_t kv_dtype_bits(KvDtype dtype);
std::string_view kv_dtype_name(KvDtype dtype);
// "f32", "f16", "q8_0", "fp8_e4m3" (also "fp8"), "q4_0"; nullopt otherwise.
std::optional<KvDtype> kv_dtype_from_name(std::string_view name);
// "f32|f16|q8_0|fp8_e4m3|q4_0", for help texts and error messages.
std::string kv_dtype_choices();

}  // namespace tokenmill::kv
