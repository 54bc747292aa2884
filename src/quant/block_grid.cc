#include "quant/block_grid.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/legacy_codes.h"
#include "kernels/quant_blocks.h"
#include "util/fp16.h"

namespace tokenmill::quant {
namespace {

using gguf::TensorType;
using namespace kernels;

// Q4_K/Q5_K's twelve bytes -> 8 six-bit scales and mins (as the decoder).
void unpack_scales_k4(const uint8_t* s, int* sc, int* mn) {
  for (int k = 0; k < 4; ++k) {
    sc[k] = s[k] & 63;
    mn[k] = s[k + 4] & 63;
    sc[k + 4] = (s[k + 8] & 0x0f) | ((s[k] >> 6) << 4);
    mn[k + 4] = (s[k + 8] >> 4) | ((s[k + 4] >> 6) << 4);
  }
}

// Q3_K's twelve bytes -> 16 signed scales.
void unpack_scales_q3(const uint8_t* s, int* sc) {
  for (int k = 0; k < 16; ++k) {
    const int lo = k < 8 ? (s[k] & 0x0f) : (s[k - 8] >> 4);
    const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
    sc[k] = (lo | (hi << 4)) - 32;
  }
}

void fill(BlockGrid& g, int begin, int count, float step, float offset) {
  std::fill(g.step + begin, g.step + begin + count, step);
  std::fill(g.offset + begin, g.offset + begin + count, offset);
}

// Legacy 32-element blocks: one scale (and offset) for the block.
void legacy_grid(TensorType type, const uint8_t* block, BlockGrid& g) {
  g.size = 32;
  uint16_t d, m = 0;
  std::memcpy(&d, block, 2);
  const bool asym = type == TensorType::Q4_1 || type == TensorType::Q5_1;
  if (asym) std::memcpy(&m, block + 2, 2);
  switch (type) {
    case TensorType::Q4_0: g.max_code = 15, g.zero = 8; break;
    case TensorType::Q4_1: g.max_code = 15, g.zero = 0; break;
    case TensorType::Q5_0: g.max_code = 31, g.zero = 16; break;
    case TensorType::Q5_1: g.max_code = 31, g.zero = 0; break;
    default: g.max_code = 255, g.zero = 128; break;  // Q8_0: int8 stored as code - 128
  }
  fill(g, 0, 32, fp16_to_fp32(d), asym ? fp16_to_fp32(m) : 0.0f);
}

void k_grid(TensorType type, const uint8_t* block, BlockGrid& g) {
  g.size = kQK_K;
  if (type == TensorType::Q4_K || type == TensorType::Q5_K) {
    uint16_t d, dmin;
    std::memcpy(&d, block, 2);
    std::memcpy(&dmin, block + 2, 2);
    int sc[8], mn[8];
    unpack_scales_k4(block + 4, sc, mn);
    g.max_code = type == TensorType::Q4_K ? 15 : 31;
    g.zero = 0;
    for (int k = 0; k < 8; ++k) {
      fill(g, 32 * k, 32, fp16_to_fp32(d) * static_cast<float>(sc[k]),
           -(fp16_to_fp32(dmin) * static_cast<float>(mn[k])));
    }
  } else if (type == TensorType::Q6_K) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(block);
    uint16_t d;
    std::memcpy(&d, &b->d, 2);
    g.max_code = 63, g.zero = 32;
    for (int k = 0; k < 16; ++k) fill(g, 16 * k, 16, fp16_to_fp32(d) * static_cast<float>(b->scales[k]), 0.0f);
  } else if (type == TensorType::Q3_K) {
    const auto* b = reinterpret_cast<const BlockQ3_K*>(block);
    uint16_t d;
    std::memcpy(&d, &b->d, 2);
    int sc[16];
    unpack_scales_q3(b->scales, sc);
    g.max_code = 7, g.zero = 4;
    for (int k = 0; k < 16; ++k) fill(g, 16 * k, 16, fp16_to_fp32(d) * static_cast<float>(sc[k]), 0.0f);
  } else {  // Q2_K
    const auto* b = reinterpret_cast<const BlockQ2_K*>(block);
    uint16_t d, dmin;
    std::memcpy(&d, &b->d, 2);
    std::memcpy(&dmin, &b->dmin, 2);
    g.max_code = 3, g.zero = 0;
    for (int k = 0; k < 16; ++k) {
      fill(g, 16 * k, 16, fp16_to_fp32(d) * static_cast<float>(b->scales[k] & 0x0f),
           -(fp16_to_fp32(dmin) * static_cast<float>(b->scales[k] >> 4)));
    }
  }
}

// Legacy blocks through the kernels' packer, with the block's own scale
// and offset bits; Q8_0's codes are stored as int8 (code - 128).
void write_legacy(TensorType type, uint8_t* block, const uint8_t* c) {
  uint16_t d, m = 0;
  std::memcpy(&d, block, 2);
  if (type == TensorType::Q4_1 || type == TensorType::Q5_1) std::memcpy(&m, block + 2, 2);
  int codes[32];
  for (int j = 0; j < 32; ++j) codes[j] = type == TensorType::Q8_0 ? static_cast<int>(c[j]) - 128 : c[j];
  kernels::pack_legacy_block(type, d, m, codes, block);
}

// Q4_K/Q5_K: sub-block k's element i: nibble (k & 1) of qs[32 (k / 2) + i];
// Q5_K's fifth bit in bit k of qh[i].
void write_k4(TensorType type, uint8_t* block, const uint8_t* c) {
  uint8_t* qs =
      type == TensorType::Q4_K ? reinterpret_cast<BlockQ4_K*>(block)->qs : reinterpret_cast<BlockQ5_K*>(block)->qs;
  for (int k = 0; k < 8; k += 2) {
    for (int i = 0; i < 32; ++i) {
      qs[16 * k + i] = static_cast<uint8_t>((c[32 * k + i] & 15) | ((c[32 * (k + 1) + i] & 15) << 4));
    }
  }
  if (type == TensorType::Q5_K) {
    uint8_t* qh = reinterpret_cast<BlockQ5_K*>(block)->qh;
    for (int i = 0; i < 32; ++i) {
      uint8_t bits = 0;
      for (int k = 0; k < 8; ++k) bits |= static_cast<uint8_t>(((c[32 * k + i] >> 4) & 1) << k);
      qh[i] = bits;
    }
  }
}

// Q2_K/Q3_K/Q6_K: element 128 h + 32 t + i. Q2_K/Q3_K: low two bits at bit
// 2t of qs[32 h + i]; Q3_K's third bit at bit 4h + t of hmask[i]. Q6_K: low
// nibble of ql[64 h + 32 (t & 1) + i] (high nibble for t >= 2), two high
// bits at bit 2t of qh[32 h + i].
void write_k_small(TensorType type, uint8_t* block, const uint8_t* c) {
  if (type == TensorType::Q6_K) {
    auto* b = reinterpret_cast<BlockQ6_K*>(block);
    std::memset(b->ql, 0, sizeof(b->ql));
    std::memset(b->qh, 0, sizeof(b->qh));
    for (int h = 0; h < 2; ++h) {
      for (int t = 0; t < 4; ++t) {
        for (int i = 0; i < 32; ++i) {
          const int v = c[128 * h + 32 * t + i];
          b->ql[64 * h + 32 * (t & 1) + i] |= static_cast<uint8_t>((v & 15) << (t < 2 ? 0 : 4));
          b->qh[32 * h + i] |= static_cast<uint8_t>(((v >> 4) & 3) << (2 * t));
        }
      }
    }
    return;
  }
  uint8_t* qs =
      type == TensorType::Q3_K ? reinterpret_cast<BlockQ3_K*>(block)->qs : reinterpret_cast<BlockQ2_K*>(block)->qs;
  std::memset(qs, 0, 64);
  uint8_t* hmask = type == TensorType::Q3_K ? reinterpret_cast<BlockQ3_K*>(block)->hmask : nullptr;
  if (hmask != nullptr) std::memset(hmask, 0, 32);
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < 4; ++t) {
      for (int i = 0; i < 32; ++i) {
        const int v = c[128 * h + 32 * t + i];
        qs[32 * h + i] |= static_cast<uint8_t>((v & 3) << (2 * t));
        if (hmask != nullptr) hmask[i] |= static_cast<uint8_t>(((v >> 2) & 1) << (4 * h + t));
      }
    }
  }
}

bool is_legacy(TensorType t) {
  return t == TensorType::Q4_0 || t == TensorType::Q4_1 || t == TensorType::Q5_0 || t == TensorType::Q5_1 ||
         t == TensorType::Q8_0;
}

}  // namespace

int BlockGrid::nearest_code(int i, float v) const {
  if (step[i] == 0.0f) return zero;
  const float q = std::nearbyint((v - offset[i]) / step[i]) + static_cast<float>(zero);
  return static_cast<int>(std::clamp(q, 0.0f, static_cast<float>(max_code)));
}

bool has_block_grid(TensorType type) {
  return is_legacy(type) || (type >= TensorType::Q2_K && type <= TensorType::Q6_K);
}

void read_block_grid(TensorType type, const uint8_t* block, BlockGrid& grid) {
  if (is_legacy(type)) {
    legacy_grid(type, block, grid);
  } else {
    k_grid(type, block, grid);
  }
}

void write_block_codes(TensorType type, uint8_t* block, const uint8_t* codes) {
  if (is_legacy(type)) {
    write_legacy(type, block, codes);
  } else if (type == TensorType::Q4_K || type == TensorType::Q5_K) {
    write_k4(type, block, codes);
  } else {
    write_k_small(type, block, codes);
  }
}

}  // namespace tokenmill::quant
