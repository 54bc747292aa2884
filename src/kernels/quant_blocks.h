// GGUF (ggml) quantization block layouts, byte for byte as stored in files.
// Every multi-byte field is little-endian (tokenmill only runs on
// little-endian hosts). Half-precision fields are raw IEEE fp16 bits; convert
// with util/fp16.h. The static_asserts pin each struct to GGUF's block size,
// so a layout mistake fails the build rather than corrupting a model.
#pragma once

#include <cstdint>

namespace tokenmill::kernels {

inline constexpr int kQK4_0 = 32;  // elements per legacy block (all legacy types)
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK_K = 256;  // elements per K-quant super-block

#pragma pack(push, 1)

// x[j] = d * (q[j] - 8); q[j] = low nibble of qs[j] for j < 16,
// high nibble of qs[j - 16] for j >= 16.
struct BlockQ4_0 {
  uint16_t d;      // fp16 scale
  uint8_t qs[16];  // 32 x 4-bit
};
static_assert(sizeof(BlockQ4_0) == 18);

// x[j] = d * q[j] + m; nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;  // fp16 scale
  uint16_t m;  // fp16 offset (the block minimum)
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20);

// x[j] = d * (q[j] - 16); q[j] = nibble as Q4_0 | (bit j of qh) << 4, where
// qh is read as one little-endian uint32.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // fifth bits of the 32 elements
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22);

// x[j] = d * q[j] + m; bits as Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24);

// x[j] = d * qs[j].
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

// x[j] = d * qs[j]; s = d * sum(qs) (lets dot products with Q4_1/Q5_1
// fold in the offset term without a second pass). Not a file type.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_1) == 36);

// 16 sub-blocks of 16 elements. scales[k] holds sub-block k's 4-bit scale
// (low nibble) and 4-bit min (high nibble);
// x = d * scale * q - dmin * min with 2-bit q. Element e (of 256): half
// h = e / 128, r = e % 128, shift 2 * (r / 32), byte qs[32 * h + r % 32],
// sub-block 8 * h + r / 16.
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// 16 sub-blocks of 16 elements; x = d * (s - 32) * (q - (high bit ? 0 : 4))
// with 2 low bits of q placed as in Q2_K and the high bit in
// hmask[e % 32] bit (e / 32). The 6-bit scale s of sub-block k: low 4 bits
// are scales[k] & 15 (k < 8) or scales[k - 8] >> 4 (k >= 8); high 2 bits are
// (scales[8 + k % 4] >> (2 * (k / 4))) & 3.
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// 8 sub-blocks of 32 elements; x = d * sc * q - dmin * m with 4-bit q.
// Sub-block k: elements 32k..32k+31 live in qs[32 * (k / 2) + i], low nibble
// for even k, high nibble for odd k. 6-bit sc/m packing in scales[12]: for
// k < 4, sc = scales[k] & 63, m = scales[k + 4] & 63; for k >= 4,
// sc = (scales[k + 4] & 15) | (scales[k - 4] >> 6) << 4,
// m = (scales[k + 4] >> 4) | (scales[k] >> 6) << 4.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);

// As Q4_K with a fifth bit: element 32k + i has its high bit in qh[i] bit k.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176);

// 16 sub-blocks of 16 elements; x = d * scales[e / 16] * (q - 32), 6-bit q.
// Element e: half h = e / 128, r = e % 128, quarter t = r / 32, i = r % 32.
// Low 4 bits: ql[64h + i + 32 * (t & 1)], low nibble for t < 2, high for
// t >= 2. High 2 bits: (qh[32h + i] >> 2t) & 3.
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// x[e] = d * qs[e]; bsums[k] = sum of qs[16k..16k+15]. Intermediate type
// for dot products with K-quants, not normally stored in files.
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ8_K) == 292);

#pragma pack(pop)

}  // namespace tokenmill::kernels
