// Integer decode kernels (type_kernels.h: the rows' q16_rows) of every table
// this CPU runs, for every type each supports, against the scalar
// reference: matmul_ref (reference dequantization, double dot) on the
// dequantized activations, over column counts, row ranges that are not
// multiples of anything, 1..4 tokens, activations with outliers; row splits
// must not change a bit.
#include "kernels/dispatch.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/test_util.h"

namespace tokenmill::kernels {
namespace {

using gguf::TensorType;
using testing::Acts;
using testing::Weights;

// The tables with integer decode kernels (none: the test skips, naming why).
std::vector<const KernelTable*> q16_tables() {
  std::vector<const KernelTable*> out;
  for (const KernelTable* kt : available_kernels()) {
    if (std::ranges::any_of(kt->types, [](const TypeKernels& k) { return k.q16_rows != nullptr; })) out.push_back(kt);
  }
  return out;
}

// The types each ISA promises integer decode kernels for (avx2/avx2.h,
// neon/neon.h): a table that quietly drops one would still pass through the
// slower float path.
std::vector<TensorType> promised_q16_types(Isa isa) {
  if (isa == Isa::kNeon) {
    return {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
            TensorType::Q8_0, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K};
  }
  return {std::begin(testing::kBlockQuantTypes), std::end(testing::kBlockQuantTypes)};
}

std::vector<int64_t> dot_lengths(TensorType type) {
  if (gguf::tensor_type_info(type).block_size == 32) return {32, 64, 96, 640};
  return {256, 512, 1280};
}

std::vector<float> activations(int64_t n, uint32_t seed) {
  auto x = testing::gaussian(n, seed);
  for (int64_t i = 0; i < n; i += 37) x[static_cast<size_t>(i)] *= 60.0f;  // outliers
  return x;
}

TEST(VecDot, EveryTypeMatchesReference) {
  const auto tables = q16_tables();
  if (tables.empty()) GTEST_SKIP() << "no kernel table with integer decode kernels on this CPU";
  for (const KernelTable* kt : tables) {
    for (TensorType type : promised_q16_types(kt->isa)) {
      ASSERT_NE(kt->of(type).q16_rows, nullptr) << isa_name(kt->isa) << " " << gguf::tensor_type_name(type);
    }
    for (TensorType type : testing::kBlockQuantTypes) {
      if (kt->of(type).q16_rows == nullptr) continue;
      for (int64_t cols : dot_lengths(type)) {
        const int64_t rows = 13;
        Weights w(type, rows, cols, static_cast<uint32_t>(cols) + 1);
        for (int64_t nt = 1; nt <= 4; ++nt) {
          const auto x = activations(nt * cols, static_cast<uint32_t>(nt));
          const Acts acts(x.data(), nt, cols);
          std::vector<float> y(static_cast<size_t>(nt * rows), -1.0f), ref(y.size());
          kt->of(type).q16_rows(w.view, 2, rows - 1, acts.buffer.view(), nt, y.data());  // rows [2, 12)
          matmul_ref(w.view, acts.rounded.data(), nt, ref.data());
          std::vector<float> row(static_cast<size_t>(cols));
          for (int64_t r = 0; r < rows; ++r) {
            dequantize_weight_row(w.view, r, row.data());
            const std::vector<float> bias = testing::bias_terms(w.view, r);
            for (int64_t t = 0; t < nt; ++t) {
              const std::string what = std::string(isa_name(kt->isa)) + " " +
                                       std::string(gguf::tensor_type_name(type)) + " cols " + std::to_string(cols) +
                                       " tokens " + std::to_string(nt) + " row " + std::to_string(r);
              const size_t i = static_cast<size_t>(t * rows + r);
              if (r < 2 || r >= rows - 1) {
                ASSERT_EQ(y[i], -1.0f) << what << ": wrote outside the row range";
                continue;
              }
              // Steps: AVX2: cols/64 FMAs per accumulator, 2 accumulators,
              // 8 lanes; NEON: cols/128 per lane, 4 lanes; then the bias
              // chain and the scale products: under cols/8 + 16 for both.
              const double tol =
                  testing::rounding_bound(row, bias, acts.rounded.data() + t * cols, cols, cols / 8.0 + 16);
              ASSERT_NEAR(y[i], ref[i], tol) << what;
            }
          }
        }
      }
    }
  }
}

// A wrong nibble order, scale or minimum moves a result by about one
// weight times one activation; check that the test above would notice: the
// error of a deliberately corrupted scale is far above its tolerance.
TEST(VecDot, ToleranceIsTightEnoughToCatchAWrongScale) {
  const auto tables = q16_tables();
  if (tables.empty()) GTEST_SKIP() << "no kernel table with integer decode kernels on this CPU";
  for (const KernelTable* kt : tables) {
    Weights w(TensorType::Q4_0, 1, 256, 3);
    const auto x = activations(256, 4);
    const Acts acts(x.data(), 1, 256);
    float y = 0, ref = 0;
    kt->of(TensorType::Q4_0).q16_rows(w.view, 0, 1, acts.buffer.view(), 1, &y);
    w.bytes[18 * 3 + 1] ^= 0x04;  // flip a bit of block 3's fp16 scale
    matmul_ref(w.view, acts.rounded.data(), 1, &ref);
    std::vector<float> row(256);
    dequantize_weight_row(w.view, 0, row.data());
    const double tol =
        testing::rounding_bound(row, std::vector<float>(256, 0.0f), acts.rounded.data(), 256, 256 / 8.0 + 16);
    EXPECT_GT(std::fabs(double(y) - ref), 100 * tol) << isa_name(kt->isa);
  }
}

TEST(VecDot, RowSplitDoesNotChangeResults) {
  const auto tables = q16_tables();
  if (tables.empty()) GTEST_SKIP() << "no kernel table with integer decode kernels on this CPU";
  for (const KernelTable* kt : tables) {
    for (TensorType type : testing::kBlockQuantTypes) {
      if (kt->of(type).q16_rows == nullptr) continue;
      const int64_t cols = 512, rows = 29;
      Weights w(type, rows, cols, 9);
      const auto x = activations(3 * cols, 10);
      const Acts acts(x.data(), 3, cols);
      std::vector<float> whole(static_cast<size_t>(3 * rows)), parts(whole.size());
      kt->of(type).q16_rows(w.view, 0, rows, acts.buffer.view(), 3, whole.data());
      for (int64_t r0 = 0; r0 < rows; r0 += 5) {
        kt->of(type).q16_rows(w.view, r0, std::min(rows, r0 + 5), acts.buffer.view(), 3, parts.data());
      }
      ASSERT_EQ(0, std::memcmp(whole.data(), parts.data(), whole.size() * sizeof(float)))
          << isa_name(kt->isa) << " " << gguf::tensor_type_name(type);
    }
  }
}

TEST(VecDot, UnsupportedTypesAreReported) {
  const auto tables = q16_tables();
  if (tables.empty()) GTEST_SKIP() << "no kernel table with integer decode kernels on this CPU";
  for (const KernelTable* kt : tables) {
    for (TensorType type : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_1, TensorType::Q8_K}) {
      EXPECT_EQ(kt->of(type).q16_rows, nullptr) << isa_name(kt->isa) << " " << gguf::tensor_type_name(type);
    }
  }
}

}  // namespace
}  // namespace tokenmill::kernels
