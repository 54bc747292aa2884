#include "kernels/interleave.h"

#include <cstring>

#include "util/check.h"

namespace tokenmill::kernels {

namespace {

// Q4_K's 12 bytes of packed 6-bit scales and minimums (quant_blocks.h).
void unpack_scales_mins(const uint8_t* q, uint8_t sc[8], uint8_t mn[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    mn[j] = q[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((q[j + 8] & 15) | ((q[j] >> 6) << 4));
    mn[j + 4] = static_cast<uint8_t>((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
  }
}

// Calls place(in, out, i) for every kCols-column block of every row (32:
// the legacy types, 256: the K-quant super-blocks): `in` the row's block of
// kBlockBytes, `out` the interleaved unit of kUnitBytes that holds it, as
// row i of its group.
template <int64_t kCols, int64_t kBlockBytes, int64_t kUnitBytes, class Place>
void for_each_block(const WeightView& w, uint8_t* dst, const Place& place) {
  const int64_t blocks = w.cols / kCols;
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < w.rows; ++r) {
    const int64_t g = r / kInterleaveRows, i = r % kInterleaveRows;
    for (int64_t b = 0; b < blocks; ++b) {
      place(src + (r * blocks + b) * kBlockBytes, dst + (g * blocks + b) * kUnitBytes, i);
    }
  }
}

void interleave_q4_k(const WeightView& w, uint8_t* dst) {
  // Q4_K: d, dmin, 12 bytes of scales, 128 bytes of nibbles.
  for_each_block<256, 144, kQ4_Kx16BlockBytes>(w, dst, [](const uint8_t* in, uint8_t* out, int64_t i) {
    for (int64_t k = 0; k < 4; ++k) {
      for (int64_t p = 0; p < 16; ++p) std::memcpy(out + 512 * k + 32 * p + 2 * i, in + 16 + 32 * k + 2 * p, 2);
    }
    std::memcpy(out + kQ4_Kx16Scales + 2 * i, in, 2);
    std::memcpy(out + kQ4_Kx16Scales + 32 + 2 * i, in + 2, 2);
    uint8_t sc[8], mn[8];
    unpack_scales_mins(in + 4, sc, mn);
    for (int j = 0; j < 8; ++j) {
      out[kQ4_Kx16Scales + 64 + 16 * j + i] = sc[j];
      out[kQ4_Kx16Scales + 192 + 16 * j + i] = mn[j];
    }
  });
}

// Q6_K's value of column c (0..255) of one super-block, 0..63
// (quant_blocks.h).
int q6_k_value(const uint8_t* block, int64_t c) {
  const int64_t h = c / 128, r = c % 128, t = r / 32, i = r % 32;
  const uint8_t low = block[64 * h + i + 32 * (t & 1)];
  const int low4 = t < 2 ? low & 15 : low >> 4;
  const int high2 = (block[128 + 32 * h + i] >> (2 * t)) & 3;
  return low4 | high2 << 4;
}

void interleave_q6_k(const WeightView& w, uint8_t* dst) {
  // Q6_K: ql[128], qh[64], int8 scales[16], fp16 d.
  for_each_block<256, 210, kQ6_Kx16BlockBytes>(w, dst, [](const uint8_t* in, uint8_t* out, int64_t i) {
    for (int64_t c = 0; c < 256; ++c) {
      const int v = q6_k_value(in, c);
      const int64_t j = c / 32, p = (c % 32) / 2, e = c % 2;
      uint8_t* blk = out + 384 * j;
      // Low 4 bits: pairs 0..7 in the low nibbles, 8..15 in the high.
      blk[32 * (p % 8) + 2 * i + e] |= static_cast<uint8_t>((v & 15) << (p < 8 ? 0 : 4));
      // High 2 bits: segment (p % 8) / 2, crumb 2 (p % 2) + (p >= 8).
      const int crumb = static_cast<int>(2 * (p % 2) + (p >= 8 ? 1 : 0));
      blk[256 + 32 * ((p % 8) / 2) + 2 * i + e] |= static_cast<uint8_t>((v >> 4) << (2 * crumb));
    }
    for (int64_t h = 0; h < 16; ++h) out[kQ6_Kx16Scales + 16 * h + i] = in[192 + h];
    std::memcpy(out + kQ6_Kx16Scales + 256 + 2 * i, in + 208, 2);
  });
}

// Q4_0 (fp16 d, 16 bytes of nibbles) and Q8_0 (fp16 d, 32 int8 values):
// a block's value bytes go two at a time to segment p, the scale after the
// 16 rows' values.
template <int64_t kBlockBytes, int64_t kUnitBytes>
void interleave_legacy(const WeightView& w, uint8_t* dst) {
  constexpr int64_t kValues = kBlockBytes - 2;
  for_each_block<32, kBlockBytes, kUnitBytes>(w, dst, [](const uint8_t* in, uint8_t* out, int64_t i) {
    for (int64_t p = 0; p < kValues / 2; ++p) std::memcpy(out + 32 * p + 2 * i, in + 2 + 2 * p, 2);
    std::memcpy(out + 16 * kValues + 2 * i, in, 2);
  });
}

// Q5_0 (fp16 d, uint32 qh, 16 bytes of nibbles): the nibbles as Q4_0's,
// the fifth bits regrouped by column pair (interleave.h).
void interleave_q5_0(const WeightView& w, uint8_t* dst) {
  for_each_block<32, 22, kQ5_0x16BlockBytes>(w, dst, [](const uint8_t* in, uint8_t* out, int64_t i) {
    for (int64_t p = 0; p < 8; ++p) std::memcpy(out + 32 * p + 2 * i, in + 6 + 2 * p, 2);
    uint32_t qh;
    std::memcpy(&qh, in + 2, sizeof(qh));  // little-endian host
    for (int64_t p = 0; p < 8; ++p) {
      const int64_t s = p / 4, k = p % 4;
      for (int64_t e = 0; e < 2; ++e) {
        const uint32_t low = (qh >> (2 * p + e)) & 1, high = (qh >> (16 + 2 * p + e)) & 1;
        out[kQ5_0x16HighBits + 32 * s + 2 * i + e] |= static_cast<uint8_t>(low << (2 * k) | high << (2 * k + 1));
      }
    }
    std::memcpy(out + kQ5_0x16HighBits + 64 + 2 * i, in, 2);
  });
}

}  // namespace

bool has_interleaved_layout(gguf::TensorType type) {
  return type == gguf::TensorType::Q4_0 || type == gguf::TensorType::Q5_0 || type == gguf::TensorType::Q8_0 ||
         type == gguf::TensorType::Q4_K || type == gguf::TensorType::Q6_K;
}

int64_t interleaved_bytes(const WeightView& w) {
  TM_CHECK(has_interleaved_layout(w.type) && w.cols % gguf::tensor_type_info(w.type).block_size == 0);
  const int64_t groups = (w.rows + kInterleaveRows - 1) / kInterleaveRows;
  switch (w.type) {
    case gguf::TensorType::Q4_K: return groups * (w.cols / 256) * kQ4_Kx16BlockBytes;
    case gguf::TensorType::Q6_K: return groups * (w.cols / 256) * kQ6_Kx16BlockBytes;
    case gguf::TensorType::Q8_0: return groups * (w.cols / 32) * kQ8_0x16BlockBytes;
    case gguf::TensorType::Q5_0: return groups * (w.cols / 32) * kQ5_0x16BlockBytes;
    default: return groups * (w.cols / 32) * kQ4_0x16BlockBytes;
  }
}

void interleave_weights(const WeightView& w, uint8_t* dst) {
  TM_CHECK(has_interleaved_layout(w.type) && w.cols % gguf::tensor_type_info(w.type).block_size == 0);
  std::memset(dst, 0, static_cast<size_t>(interleaved_bytes(w)));
  switch (w.type) {
    case gguf::TensorType::Q4_K: return interleave_q4_k(w, dst);
    case gguf::TensorType::Q6_K: return interleave_q6_k(w, dst);
    case gguf::TensorType::Q8_0: return interleave_legacy<34, kQ8_0x16BlockBytes>(w, dst);
    case gguf::TensorType::Q5_0: return interleave_q5_0(w, dst);
    default: return interleave_legacy<18, kQ4_0x16BlockBytes>(w, dst);
  }
}

}  // namespace tokenmill::kernels
