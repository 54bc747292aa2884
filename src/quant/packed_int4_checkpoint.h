// 4-bit linear layers of GPTQ and AWQ checkpoints, unpacked into one
// layout: integer codes, per-group zeros and fp16 scales, so that
//   w[o, i] = scale[g, o] * (code[o, i] - zero[g, o]),  g = group[i].
// Packing, as AutoGPTQ and AutoAWQ write it (int32 words, value k of a word
// at bits 4k..4k+3):
//   GPTQ  qweight [in/8, out]   8 codes along the input dim: word [r, o]
//                               holds code[o, 8r + k] at nibble k
//         qzeros  [G, out/8]    8 zeros along the output dim: word [g, c]
//                               holds zero[g, 8c + k]; "gptq" (v1) stores
//                               zero - 1 (read back as (nibble + 1), so a
//                               stored 15 is the zero 16), "gptq_v2" zero
//         scales  [G, out] fp16, g_idx [in] int32 (optional: i / group)
//   AWQ   qweight [in, out/8]   8 codes along the output dim in AutoAWQ's
//                               interleave: nibble k holds output column
//                               8c + {0, 2, 4, 6, 1, 3, 5, 7}[k]
//         qzeros  [G, out/8]    the same interleave; scales [G, out] fp16
// with G = in / group_size (1 for group size -1).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "quant/checkpoint_config.h"
#include "quant/safetensors_reader.h"
#include "util/fp16.h"

namespace tokenmill::quant {

struct Int4Matrix {
  int64_t rows = 0;  // output features
  int64_t cols = 0;  // input features
  int64_t num_groups = 0;
  std::vector<uint8_t> codes;    // [rows, cols], 0..15
  std::vector<uint8_t> zeros;    // [num_groups, rows], 0..16
  std::vector<uint16_t> scales;  // [num_groups, rows], fp16 bits
  std::vector<int32_t> group;    // [cols], each in [0, num_groups)

  // The checkpoint's value of w[r, c], computed in fp32 as its kernels do.
  float value(int64_t r, int64_t c) const {
    const int64_t gi = group[c] * rows + r;
    return fp16_to_fp32(scales[gi]) * static_cast<float>(static_cast<int>(codes[r * cols + c]) - zeros[gi]);
  }
};

// The tensors of one packed linear layer; g_idx may be null (GPTQ without
// it, and always for AWQ).
struct PackedLinear {
  std::string prefix;  // "model.layers.0.self_attn.q_proj", for messages
  const SafetensorsTensor* qweight = nullptr;
  const SafetensorsTensor* qzeros = nullptr;
  const SafetensorsTensor* scales = nullptr;
  const SafetensorsTensor* g_idx = nullptr;
};

// Unpacks a layer that must have `rows` outputs and `cols` inputs (the
// base model's matrix). Throws tokenmill::Error naming the tensor for a
// dtype or shape other than the layout above, a group size that does not
// divide cols, or a g_idx entry outside [0, G).
// Cost: one pass over the packed words; allocates rows * cols bytes.
Int4Matrix unpack_linear(const PackedLinear& packed, const CheckpointConfig& config, int64_t rows, int64_t cols);

// llama.cpp's rotary reordering of q/k rows for the llama architecture:
// within each of n_head heads of head_dim rows, row (k * head_dim / 2 + j)
// of the Hugging Face layout becomes row (2 * j + k). Returns, for every
// GGUF row r, the source row it comes from. Throws when rows is not
// n_head times an even head size.
std::vector<int64_t> rope_row_order(int64_t rows, int64_t n_head);

// m's rows reordered: new row r is old row order[r] (codes, zeros, scales).
// Precondition: order is a permutation of [0, m.rows) (checked).
void reorder_rows(Int4Matrix& m, std::span<const int64_t> order);

}  // namespace tokenmill::quant
