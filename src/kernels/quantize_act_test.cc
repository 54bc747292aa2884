// Activation quantization (quantize_act.h): hand-computed blocks, the AVX2
// version bit for bit against the scalar reference, and the error bound the
// matmul tests rely on.
#include "kernels/quantize_act.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/test_util.h"

namespace tokenmill::kernels {
namespace {

struct Quantized {
  explicit Quantized(int64_t nt, int64_t cols) { buffer.resize(nt, cols); }
  QuantizedActsOut out() { return {buffer.qs(), buffer.d(), buffer.s32(), buffer.s16()}; }
  QuantizedActsBuffer buffer;
};

// One block: max |x| = 2, so d = 2 / 32767 and q = round(x * 32767 / 2).
TEST(QuantizeActs, HandComputedBlock) {
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f;     // 16383.5 -> 16384 (ties to even)
  x[1] = -2.0f;    // -32767
  x[2] = 0.5f;     // 8191.75 -> 8192
  x[17] = 0.25f;   // 4095.875 -> 4096
  x[31] = -1e-9f;  // -1.6e-5 -> 0
  Quantized q(1, 32);
  quantize_acts_ref(x.data(), 1, 32, q.out());
  const int16_t* qs = q.buffer.qs();
  EXPECT_EQ(qs[0], 16384);
  EXPECT_EQ(qs[1], -32767);
  EXPECT_EQ(qs[2], 8192);
  EXPECT_EQ(qs[3], 0);
  EXPECT_EQ(qs[17], 4096);
  EXPECT_EQ(qs[31], 0);
  EXPECT_EQ(q.buffer.d()[0], 2.0f / 32767.0f);
  const float d = 2.0f / 32767.0f;
  EXPECT_EQ(q.buffer.s16()[0], d * static_cast<float>(16384 - 32767 + 8192));
  EXPECT_EQ(q.buffer.s16()[1], d * 4096.0f);
  EXPECT_EQ(q.buffer.s32()[0], d * static_cast<float>(16384 - 32767 + 8192 + 4096));
}

TEST(QuantizeActs, ZeroAndTinyBlocksAreZeros) {
  std::vector<float> x(96, 0.0f);
  x[40] = 3.0f;    // second block
  x[70] = 1e-35f;  // third block: below kActTiny (32767 / 1e-35 overflows)
  x[71] = -2e-38f;
  Quantized q(1, 96);
  quantize_acts_ref(x.data(), 1, 96, q.out());
  EXPECT_EQ(q.buffer.d()[0], 0.0f);
  EXPECT_EQ(q.buffer.s32()[0], 0.0f);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q.buffer.qs()[i], 0);
  for (int i = 64; i < 96; ++i) EXPECT_EQ(q.buffer.qs()[i], 0);
  EXPECT_EQ(q.buffer.qs()[40], 32767);
  EXPECT_EQ(q.buffer.d()[1], 3.0f / 32767.0f);
}

// The bound matmul_test_util.h's activation_bound uses: |x - d q| is at most
// half a step plus the rounding of the scale and of x * (32767 / max), which
// together stay under 0.51 * max / 32767.
TEST(QuantizeActs, ErrorWithinBound) {
  for (float scale : {1e-6f, 1.0f, 3e4f}) {
    auto x = testing::gaussian(64 * 32, 5, scale);
    for (size_t i = 0; i < x.size(); i += 31) x[i] *= 200.0f;  // outliers
    Quantized q(2, 1024);
    quantize_acts_ref(x.data(), 2, 1024, q.out());
    std::vector<float> back(1024);
    for (int64_t t = 0; t < 2; ++t) {
      dequantize_acts(q.buffer.view(), t, back.data());
      for (int64_t b = 0; b < 32; ++b) {
        const float* xb = x.data() + t * 1024 + 32 * b;
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
        for (int j = 0; j < 32; ++j) {
          ASSERT_LE(std::fabs(double(xb[j]) - back[32 * b + j]), 0.51 * amax / 32767) << "scale " << scale;
        }
      }
    }
  }
}

// Every SIMD quantizer gives the reference's bits, over sizes, magnitudes,
// token counts and misaligned input.
TEST(QuantizeActs, SimdMatchesReferenceBitForBit) {
  const auto tables = available_kernels();
  if (tables.size() < 2) GTEST_SKIP() << "no SIMD kernel table on this CPU";
  for (const KernelTable* kt : tables) {
    if (kt->isa == Isa::kScalar) continue;
    for (int64_t cols : {32, 64, 640, 2048}) {
      for (int64_t nt : {1, 3, 5}) {
        for (int off : {0, 1, 3}) {
          std::vector<float> xs(static_cast<size_t>(nt * cols + off));
          auto x = testing::gaussian(nt * cols, static_cast<uint32_t>(cols + nt), 1.0f);
          for (size_t i = 0; i < x.size(); i += 13) x[i] *= (i % 3 == 0) ? 1e-20f : 500.0f;
          for (size_t i = 64; i < std::min<size_t>(x.size(), 96); ++i) x[i] = 0.0f;  // an all-zero block
          std::copy(x.begin(), x.end(), xs.begin() + off);
          Quantized a(nt, cols), b(nt, cols);
          quantize_acts_ref(xs.data() + off, nt, cols, a.out());
          kt->quantize_acts(xs.data() + off, nt, cols, b.out());
          const int64_t nb = nt * cols / 32;
          ASSERT_EQ(0, std::memcmp(a.buffer.qs(), b.buffer.qs(), static_cast<size_t>(nt * cols) * 2))
              << isa_name(kt->isa) << " " << cols;
          ASSERT_EQ(0, std::memcmp(a.buffer.d(), b.buffer.d(), static_cast<size_t>(nb) * 4));
          ASSERT_EQ(0, std::memcmp(a.buffer.s32(), b.buffer.s32(), static_cast<size_t>(nb) * 4));
          ASSERT_EQ(0, std::memcmp(a.buffer.s16(), b.buffer.s16(), static_cast<size_t>(2 * nb) * 4));
        }
      }
    }
  }
}

TEST(QuantizeActs, BufferArraysAre64ByteAligned) {
  QuantizedActsBuffer buffer;
  for (int64_t cols : {32, 96, 2048}) {
    buffer.resize(3, cols);
    for (const void* p : {static_cast<const void*>(buffer.qs()), static_cast<const void*>(buffer.d()),
                          static_cast<const void*>(buffer.s32()), static_cast<const void*>(buffer.s16())}) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << cols;
    }
    EXPECT_EQ(buffer.view().cols, cols);
  }
}

}  // namespace
}  // namespace tokenmill::kernels
