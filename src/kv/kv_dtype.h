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
//   Q4_0_KC:  Q4_0 storage of keys divided by per-channel scales (values
//             as Q4_0). A few channels of a key carry most of its
//             magnitude, and a group's one scale then leaves the others
//             only a code or two; divided by each channel's typical
//             magnitude, the channels of a group share a range. The model
//             measures the scales once (model/key_channel_scales.h) and
//             multiplies the queries by them, so q.k is unchanged and the
//             attention kernels read plain Q4_0.
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

enum class KvDtype { F32, F16, Q8_0, FP8_E4M3, Q4_0, Q4_0_KC };

inline constexpr int64_t kKvQuantGroup = 32;

// The layout the bytes are in (what the attention kernels read): Q4_0 for
// Q4_0_KC, the dtype itself otherwise.
inline KvDtype kv_storage_dtype(KvDtype dtype) { return dtype == KvDtype::Q4_0_KC ? KvDtype::Q4_0 : dtype; }
// Whether keys are stored divided by per-channel scales (queries multiplied).
inline bool kv_keys_channel_scaled(KvDtype dtype) { return dtype == KvDtype::Q4_0_KC; }
// Whether the dtype stores groups of scaled codes (Q8_0, FP8_E4M3, Q4_0, Q4_0_KC).
inline bool kv_dtype_quantized(KvDtype dtype) {
  dtype = kv_storage_dtype(dtype);
  return dtype == KvDtype::Q8_0 || dtype == KvDtype::FP8_E4M3 || dtype == KvDtype::Q4_0;
}
// Elements per scale group of a quantized row of n_kv_dim elements.
inline int64_t kv_quant_group(int64_t n_kv_dim) { return n_kv_dim % kKvQuantGroup == 0 ? kKvQuantGroup : n_kv_dim; }
// Bytes of one group of g elements: the fp16 scale, then the codes.
inline int64_t kv_group_bytes(KvDtype dtype, int64_t g) {
  return 2 + (kv_storage_dtype(dtype) == KvDtype::Q4_0 ? g / 2 : g);
}
// Bytes of one position's K (or V) row, scales included.
// Precondition: n_kv_dim > 0.
inline int64_t kv_row_bytes(KvDtype dtype, int64_t n_kv_dim) {
  switch (dtype) {
    case KvDtype::F32: return 4 * n_kv_dim;
    case KvDtype::F16: return 2 * n_kv_dim;
    case KvDtype::Q8_0:
    case KvDtype::FP8_E4M3:
    case KvDtype::Q4_0:
    case KvDtype::Q4_0_KC: return n_kv_dim / kv_quant_group(n_kv_dim) * kv_group_bytes(dtype, kv_quant_group(n_kv_dim));
  }
  return 0;
}

// Bits of one element's payload (32, 16, 8, or 4; the quantized types'
// per-group scales come on top: use kv_row_bytes for sizes).
int64_t kv_dtype_bits(KvDtype dtype);
std::string_view kv_dtype_name(KvDtype dtype);
// "f32", "f16", "q8_0", "fp8_e4m3" (also "fp8"), "q4_0", "q4_0_kc"; nullopt
// otherwise.
std::optional<KvDtype> kv_dtype_from_name(std::string_view name);
// "f32|f16|q8_0|fp8_e4m3|q4_0|q4_0_kc", for help texts and error messages.
std::string kv_dtype_choices();

}  // namespace tokenmill::kv
