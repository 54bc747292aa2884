// Hand-built blocks: every field set explicitly, the expected values written
// out from the GGUF format description (and a few worked by hand as literal
// numbers), independent of the decoder's loop structure.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gguf/tensor_type.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace tokenmill::kernels {
namespace {

using gguf::TensorType;

constexpr uint16_t kHalf0_125 = 0x3000;   // fp16 0.125
constexpr uint16_t kHalf0_25 = 0x3400;    // fp16 0.25
constexpr uint16_t kHalf0_5 = 0x3800;     // fp16 0.5
constexpr uint16_t kHalfMinus1 = 0xBC00;  // fp16 -1.0

template <typename Block>
std::vector<float> decode(TensorType type, const Block& block, int n) {
  std::vector<float> out(n);
  dequantize_row_ref(type, &block, out.data(), n);
  return out;
}

TEST(QuantBlocks, SizesMatchGgufTable) {
  const std::pair<TensorType, size_t> sizes[] = {
      {TensorType::Q4_0, sizeof(BlockQ4_0)}, {TensorType::Q4_1, sizeof(BlockQ4_1)},
      {TensorType::Q5_0, sizeof(BlockQ5_0)}, {TensorType::Q5_1, sizeof(BlockQ5_1)},
      {TensorType::Q8_0, sizeof(BlockQ8_0)}, {TensorType::Q8_1, sizeof(BlockQ8_1)},
      {TensorType::Q2_K, sizeof(BlockQ2_K)}, {TensorType::Q3_K, sizeof(BlockQ3_K)},
      {TensorType::Q4_K, sizeof(BlockQ4_K)}, {TensorType::Q5_K, sizeof(BlockQ5_K)},
      {TensorType::Q6_K, sizeof(BlockQ6_K)}, {TensorType::Q8_K, sizeof(BlockQ8_K)},
  };
  for (const auto& [type, size] : sizes) {
    EXPECT_EQ(gguf::tensor_type_info(type).bytes_per_block, static_cast<int64_t>(size)) << gguf::tensor_type_name(type);
  }
}

TEST(QuantBlocks, FloatTypes) {
  const float f32[2] = {1.5f, -0.0625f};
  float out[3];
  dequantize_row_ref(TensorType::F32, f32, out, 2);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -0.0625f);
  const uint16_t f16[3] = {0x3C00, 0xC000, 0x7BFF};  // 1, -2, 65504
  dequantize_row_ref(TensorType::F16, f16, out, 3);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 65504.0f);
  const uint16_t bf16[3] = {0x3F80, 0xC040, 0x4049};  // 1, -3, 3.140625
  dequantize_row_ref(TensorType::BF16, bf16, out, 3);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -3.0f);
  EXPECT_EQ(out[2], 3.140625f);
}

TEST(QuantBlocks, Q4_0) {
  BlockQ4_0 b{};
  b.d = kHalf0_5;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(TensorType::Q4_0, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 8)) << j;              // low nibble j
    EXPECT_EQ(y[j + 16], 0.5f * ((15 - j) - 8)) << j;  // high nibble 15 - j
  }
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[16], 3.5f);
}

TEST(QuantBlocks, Q4_1) {
  BlockQ4_1 b{};
  b.d = kHalf0_25;
  b.m = kHalfMinus1;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (((3 * j) % 16) << 4));
  const auto y = decode(TensorType::Q4_1, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * j - 1.0f) << j;
    EXPECT_EQ(y[j + 16], 0.25f * ((3 * j) % 16) - 1.0f) << j;
  }
  EXPECT_EQ(y[21], 2.75f);  // j = 5: high nibble 15 -> 3.75 - 1
}

// Fifth bits of the 32 elements, in element order.
constexpr int kFifth[32] = {1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1,
                            0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0, 1};

void set_fifth_bits(uint8_t* qh) {
  for (int j = 0; j < 32; ++j) qh[j / 8] |= static_cast<uint8_t>(kFifth[j] << (j % 8));
}

TEST(QuantBlocks, Q5_0) {
  BlockQ5_0 b{};
  b.d = kHalf0_5;
  set_fifth_bits(b.qh);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(TensorType::Q5_0, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j + 16 * kFifth[j] - 16)) << j;
    EXPECT_EQ(y[j + 16], 0.5f * ((15 - j) + 16 * kFifth[j + 16] - 16)) << j;
  }
  EXPECT_EQ(y[0], 0.0f);    // 0 + 16 - 16
  EXPECT_EQ(y[17], 7.0f);   // 14 + 16 - 16
  EXPECT_EQ(y[16], -0.5f);  // 15 + 0 - 16
}

TEST(QuantBlocks, Q5_1) {
  BlockQ5_1 b{};
  b.d = kHalf0_25;
  b.m = kHalfMinus1;
  set_fifth_bits(b.qh);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(TensorType::Q5_1, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * (j + 16 * kFifth[j]) - 1.0f) << j;
    EXPECT_EQ(y[j + 16], 0.25f * ((15 - j) + 16 * kFifth[j + 16]) - 1.0f) << j;
  }
  EXPECT_EQ(y[31], 3.0f);  // 0 + 16 -> 4 - 1
}

TEST(QuantBlocks, Q8_0AndQ8_1) {
  BlockQ8_0 b{};
  b.d = kHalf0_125;
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(8 * j - 128);
  const auto y = decode(TensorType::Q8_0, b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.125f * (8 * j - 128)) << j;
  EXPECT_EQ(y[0], -16.0f);

  BlockQ8_1 c{};
  c.d = kHalf0_5;
  c.s = 0x7BFF;  // s never enters the element values
  for (int j = 0; j < 32; ++j) c.qs[j] = static_cast<int8_t>(3 * j - 50);
  const auto z = decode(TensorType::Q8_1, c, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(z[j], 0.5f * (3 * j - 50)) << j;
}

TEST(QuantBlocks, Q8_K) {
  BlockQ8_K b{};
  b.d = 0.03125f;
  for (int i = 0; i < 256; ++i) b.qs[i] = static_cast<int8_t>(i - 128);
  const auto y = decode(TensorType::Q8_K, b, 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.03125f * (i - 128)) << i;
}

TEST(QuantBlocks, Q2_K) {
  BlockQ2_K b{};
  b.d = kHalf0_5;
  b.dmin = kHalf0_25;
  for (int k = 0; k < 16; ++k) b.scales[k] = static_cast<uint8_t>(k | ((15 - k) << 4));  // sc k, min 15-k
  for (int i = 0; i < 64; ++i) b.qs[i] = static_cast<uint8_t>((37 * i + 11) & 255);
  const auto y = decode(TensorType::Q2_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, r = e % 128;
    const int q = (b.qs[32 * half + r % 32] >> (2 * (r / 32))) & 3;
    const int sub = e / 16;
    EXPECT_EQ(y[e], 0.5f * sub * q - 0.25f * (15 - sub)) << e;
  }
  // Element 150: qs[54] = 217 = 0b11011001, bits 0-1 = 1; sub-block 9 (sc 9, min 6).
  EXPECT_EQ(y[150], 0.5f * 9 * 1 - 0.25f * 6);
}

TEST(QuantBlocks, Q3_K) {
  BlockQ3_K b{};
  b.d = kHalf0_5;
  int u[16];  // 6-bit biased scale codes; scale = u - 32
  for (int k = 0; k < 16; ++k) u[k] = 4 * k + 1;
  for (int k = 0; k < 8; ++k) b.scales[k] = static_cast<uint8_t>((u[k] & 15) | ((u[k + 8] & 15) << 4));
  for (int j = 0; j < 4; ++j) {
    for (int g = 0; g < 4; ++g) b.scales[8 + j] |= static_cast<uint8_t>(((u[j + 4 * g] >> 4) & 3) << (2 * g));
  }
  for (int i = 0; i < 32; ++i) b.hmask[i] = static_cast<uint8_t>((7 * i + 3) & 255);
  for (int i = 0; i < 64; ++i) b.qs[i] = static_cast<uint8_t>((29 * i + 5) & 255);
  const auto y = decode(TensorType::Q3_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, r = e % 128;
    const int low = (b.qs[32 * half + r % 32] >> (2 * (r / 32))) & 3;
    const int high = (b.hmask[e % 32] >> (e / 32)) & 1;
    const int q = low - (high ? 0 : 4);
    EXPECT_EQ(y[e], 0.5f * (u[e / 16] - 32) * q) << e;
  }
  // Element 77: qs[13] = 126, bits 4-5 = 3; hmask[13] = 94 has bit 2 set;
  // sub-block 4: u = 17, scale -15.
  EXPECT_EQ(y[77], 0.5f * -15 * 3);
  // Element 0: qs[0] = 5 -> low 1; hmask[0] = 3 bit 0 set; scale 1 - 32.
  EXPECT_EQ(y[0], 0.5f * -31 * 1);
}

constexpr uint8_t kSc4[8] = {1, 2, 3, 4, 60, 61, 62, 63};
constexpr uint8_t kMn4[8] = {5, 6, 7, 8, 33, 34, 35, 36};

// The 12-byte Q4_K/Q5_K packing of six-bit scales and mins.
void pack_k4_scales(uint8_t* s) {
  for (int k = 0; k < 4; ++k) {
    s[k] = static_cast<uint8_t>(kSc4[k] | ((kSc4[k + 4] >> 4) << 6));
    s[k + 4] = static_cast<uint8_t>(kMn4[k] | ((kMn4[k + 4] >> 4) << 6));
    s[k + 8] = static_cast<uint8_t>((kSc4[k + 4] & 15) | ((kMn4[k + 4] & 15) << 4));
  }
}

TEST(QuantBlocks, Q4_K) {
  BlockQ4_K b{};
  b.d = kHalf0_5;
  b.dmin = kHalf0_25;
  pack_k4_scales(b.scales);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((13 * i + 7) & 255);
  const auto y = decode(TensorType::Q4_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int k = e / 32, i = e % 32;
    const uint8_t byte = b.qs[32 * (k / 2) + i];
    const int q = (k % 2 == 0) ? (byte & 15) : (byte >> 4);
    EXPECT_EQ(y[e], 0.5f * kSc4[k] * q - 0.25f * kMn4[k]) << e;
  }
  // Element 5: qs[5] = 72 = 0x48 -> low nibble 8; sub-block 0 (sc 1, min 5).
  EXPECT_EQ(y[5], 0.5f * 1 * 8 - 0.25f * 5);
  // Element 163: sub-block 5 -> high nibble of qs[67] = 0x6E = 6 (sc 61, min 34).
  EXPECT_EQ(y[163], 174.5f);
}

TEST(QuantBlocks, Q5_K) {
  BlockQ5_K b{};
  b.d = kHalf0_5;
  b.dmin = kHalf0_25;
  pack_k4_scales(b.scales);
  for (int i = 0; i < 32; ++i) b.qh[i] = static_cast<uint8_t>((5 * i + 1) & 255);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((13 * i + 7) & 255);
  const auto y = decode(TensorType::Q5_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int k = e / 32, i = e % 32;
    const uint8_t byte = b.qs[32 * (k / 2) + i];
    const int q = ((k % 2 == 0) ? (byte & 15) : (byte >> 4)) + 16 * ((b.qh[i] >> k) & 1);
    EXPECT_EQ(y[e], 0.5f * kSc4[k] * q - 0.25f * kMn4[k]) << e;
  }
  // Element 167: high nibble of qs[71] = 0xA2 -> 10, qh[7] = 36 has bit 5 ->
  // q = 26; sub-block 5 (sc 61, min 34).
  EXPECT_EQ(y[167], 0.5f * 61 * 26 - 0.25f * 34);
}

TEST(QuantBlocks, Q6_K) {
  BlockQ6_K b{};
  b.d = kHalf0_5;
  for (int k = 0; k < 16; ++k) b.scales[k] = static_cast<int8_t>(9 * k - 70);
  for (int i = 0; i < 128; ++i) b.ql[i] = static_cast<uint8_t>((11 * i + 3) & 255);
  for (int i = 0; i < 64; ++i) b.qh[i] = static_cast<uint8_t>((23 * i + 9) & 255);
  const auto y = decode(TensorType::Q6_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, t = (e % 128) / 32, i = e % 32;
    const uint8_t lbyte = b.ql[64 * half + 32 * (t % 2) + i];
    const int low = t < 2 ? (lbyte & 15) : (lbyte >> 4);
    const int high = (b.qh[32 * half + i] >> (2 * t)) & 3;
    EXPECT_EQ(y[e], 0.5f * (9 * (e / 16) - 70) * (low + 16 * high - 32)) << e;
  }
  // Element 200: ql[72] = 0x1B -> high nibble 1; qh[40] = 161 -> bits 4-5 = 2;
  // q = 33 - 32 = 1; scale[12] = 38.
  EXPECT_EQ(y[200], 19.0f);
}

}  // namespace
}  // namespace tokenmill::kernels
