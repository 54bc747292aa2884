// Per-channel key scales for the q4_0_kc KV cache (kv/kv_dtype.h).
//
// A few channels of a key carry most of its magnitude (the same channels
// for every token: they come from the weights, not the text). A Q4_0 group
// of 32 channels has one scale, set by its largest element, so an outlier
// channel leaves its 31 neighbours one or two codes each; the keys' error
// then dominates what a 4-bit cache loses (docs/quantization.md). Divided by
// each channel's typical magnitude the channels of a group share a range.
// Since q.k = (q * s).(k / s), the model stores k / s and multiplies the
// queries by s, and the attention kernels read plain Q4_0.
//
// The scales are measured once per model, from the keys of a fixed text
// (key_calibration_tokens): each channel's largest magnitude. The two
// channels a RoPE rotation pairs share one scale, the pair's largest length
// sqrt(a^2 + b^2): a rotation keeps that length, so the scale holds at every
// position, and rotating stored keys (Model::shift_keys, KV policy
// rerotate) commutes with the division.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gguf/reader.h"

namespace tokenmill::model {

struct KeyHeads {
  int64_t n_head = 0;     // query heads
  int64_t n_kv_head = 0;  // key heads (n_head a multiple of it)
  int64_t head_dim = 0;
  int64_t rope_dims = 0;  // the leading channels RoPE rotates (even, <= head_dim)
  bool neox = false;      // pairs (i, i + rope_dims/2) instead of (2i, 2i + 1)
};

// Raises magnitude[h * head_dim + c] to the largest magnitude channel c of
// key head h reaches over the T rows of k ([T, n_kv_head * head_dim]);
// rotated pairs count their length, for both channels.
void accumulate_key_magnitudes(const float* k, int64_t T, const KeyHeads& heads, float* magnitude);

// A channel's scale is no smaller than this fraction of its head's largest:
// a channel the calibration text left quiet is not magnified past what a
// group of 4-bit codes can hold if another text wakes it.
inline constexpr float kKeyScaleFloor = 1.0f / 16;

// The scales of magnitudes laid out as whole heads of head_dim channels
// (one layer's [n_kv_head * head_dim], or several layers' one after the
// other): each channel's magnitude, floored per head (kKeyScaleFloor); 1
// for every channel of a head whose keys were all zero.
std::vector<float> key_scales_from_magnitudes(std::span<const float> magnitude, int64_t head_dim);

// k[t, h, c] /= scale[h, c] and q[t, j, c] *= scale[j / (n_head / n_kv_head), c]
// over T tokens (q: [T, n_head * head_dim], k: [T, n_kv_head * head_dim]).
void apply_key_scales(float* q, float* k, int64_t T, const KeyHeads& heads, std::span<const float> scale);

// The calibration input: a fixed English text through the file's tokenizer
// (with BOS when it adds one), or, for a file without a tokenizer, a fixed
// pseudo-random run of ids; at most max_tokens, each below n_vocab.
std::vector<int32_t> key_calibration_tokens(const gguf::GgufFile& file, int64_t n_vocab, int64_t max_tokens);

}  // namespace tokenmill::model
