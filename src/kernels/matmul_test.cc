// matmul: every ISA and every weight type the quant layer supports against
// matmul_ref (dequantize, then dot in double), over token counts that hit the
// decode paths (integer and float fused), the row-major panel path and the
// packed panel path, odd row counts, misaligned x/y, and 1/2/3 threads (which
// must agree bit for bit). The kernels' own sweeps are in vec_dot_test.cc,
// gemm_test.cc and quantize_act_test.cc.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/gemm.h"
#include "kernels/interleave.h"
#include "kernels/quant.h"
#include "kernels/quantize_act.h"
#include "kernels/test_util.h"

namespace tokenmill::kernels {
namespace {

using gguf::TensorType;
using testing::Acts;
using testing::bias_terms;
using testing::gaussian;
using testing::rounding_bound;
using testing::Weights;

std::vector<TensorType> weight_types() {
  std::vector<TensorType> types;
  for (TensorType t :
       {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0,
        TensorType::Q5_1, TensorType::Q8_0, TensorType::Q8_1, TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K,
        TensorType::Q5_K, TensorType::Q6_K, TensorType::Q8_K, TensorType::BF16}) {
    if (can_quantize(t)) types.push_back(t);
  }
  return types;
}

// Columns to test: a few multiples of the block size; for the float types
// also lengths that leave a partial vector.
std::vector<int64_t> col_counts(TensorType type) {
  const int64_t bs = gguf::tensor_type_info(type).block_size;
  if (bs == 1) return {1, 19, 72, 640};
  if (bs == 32) return {32, 96, 640};
  return {256, 512};
}

// Whether matmul takes an integer path (int16 activations) for this case:
// decode (q16_rows) or the int16 packed prefill kernel.
bool uses_q16(const KernelTable& kt, TensorType type, int64_t num_tokens) {
  const TypeKernels& k = kt.of(type);
  if (k.q16_rows == nullptr) return false;
  return num_tokens <= k.q16_row_max_tokens || (k.q16_decode_row != nullptr && kt.gemm_q16_packed != nullptr);
}

// Float accumulation bound (matmul_test_util.h: rounding_bound): the AVX2
// decode kernels sum cols/8 FMAs per lane (the integer path fewer), then 8
// lanes and up to 4 partial accumulators, plus the scale products: at most
// cols/8 + 16 steps (the int16 packed kernel: an FMA per 16 or 32 columns);
// the scalar ISA and the FP32 packed prefill kernel (gemm.h) sum each output
// sequentially: cols steps. A wrong element or scale is
// ~|w x| ~ sum/cols, orders of magnitude above this.
void expect_close(const KernelTable& kt, const WeightView& w, const float* x, int64_t num_tokens, const float* y,
                  const std::vector<float>& ref, const std::string& what) {
  const bool q16 = uses_q16(kt, w.type, num_tokens);
  const bool sequential =
      kt.isa == Isa::kScalar || (!q16 && kt.gemm_packed != nullptr && num_tokens >= kPackedMinTokens);
  // NEON's FP32 tiles sum cols/4 FMAs per lane (4 lanes).
  const bool neon_f32 = kt.isa == Isa::kNeon && !q16;
  const double steps = sequential ? static_cast<double>(w.cols)
                       : neon_f32 ? static_cast<double>(w.cols) / 4 + 16
                                  : static_cast<double>(w.cols) / 8 + 16;
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_weight_row(w, r, row.data());
    const std::vector<float> bias = bias_terms(w, r);
    for (int64_t t = 0; t < num_tokens; ++t) {
      const double tol = rounding_bound(row, bias, x + t * w.cols, w.cols, steps);
      const size_t i = static_cast<size_t>(t * w.rows + r);
      ASSERT_NEAR(y[i], ref[i], tol) << what << " row " << r << " token " << t;
    }
  }
}

TEST(Matmul, EveryTypeMatchesReference) {
  ThreadPool pool(2);
  for (const KernelTable* kt : available_kernels()) {
    for (TensorType type : weight_types()) {
      for (int64_t cols : col_counts(type)) {
        const int64_t rows = 37;  // not a multiple of the 4-row tiles or of 16-row units
        Weights w(type, rows, cols, 7 + static_cast<uint32_t>(cols));
        for (int64_t nt : {1, 2, 3, 4, 5, 7, 13, 16, 17, 64, 100}) {
          const int off = static_cast<int>(nt % 8);  // misaligned x and y
          std::vector<float> xs(static_cast<size_t>(nt * cols + 8));
          const auto xv = gaussian(nt * cols, 99);
          std::copy(xv.begin(), xv.end(), xs.begin() + off);
          const float* x = xs.data() + off;
          std::vector<float> ys(static_cast<size_t>(nt * rows + 8), -1.0f);
          float* y = ys.data() + (7 - off);
          matmul_with(*kt, w.view, x, nt, y, pool);
          const std::string what = std::string(isa_name(kt->isa)) + " " + std::string(gguf::tensor_type_name(type)) +
                                   " cols=" + std::to_string(cols) + " tokens=" + std::to_string(nt);
          // The integer decode path multiplies the int16-rounded x: its
          // reference is the float product with those values; the distance
          // to the exact x is bounded separately (matmul_q16_test.cc).
          const std::vector<float> xr =
              uses_q16(*kt, type, nt) ? Acts(x, nt, cols).rounded : std::vector<float>(x, x + nt * cols);
          std::vector<float> ref(static_cast<size_t>(nt * rows));
          matmul_ref(w.view, xr.data(), nt, ref.data());
          expect_close(*kt, w.view, xr.data(), nt, y, ref, what);
          ASSERT_EQ(y[nt * rows], -1.0f) << what << ": wrote past y";
          if (7 - off > 0) {
            ASSERT_EQ(y[-1], -1.0f) << what << ": wrote before y";
          }
        }
      }
    }
  }
}

// The row split over threads must not change a single bit.
TEST(Matmul, ThreadCountDoesNotChangeResults) {
  ThreadPool one(1), two(2), three(3);
  for (const KernelTable* kt : available_kernels()) {
    for (TensorType type : {TensorType::F32, TensorType::F16, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K,
                            TensorType::Q5_0, TensorType::Q3_K}) {
      Weights w(type, 203, 512, 5);
      for (int64_t nt : {1, 3, 17, 64, 100}) {
        const auto x = gaussian(nt * 512, 6);
        std::vector<float> y1(static_cast<size_t>(nt * 203)), y2(y1.size()), y3(y1.size());
        matmul_with(*kt, w.view, x.data(), nt, y1.data(), one);
        matmul_with(*kt, w.view, x.data(), nt, y2.data(), two);
        matmul_with(*kt, w.view, x.data(), nt, y3.data(), three);
        ASSERT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)))
            << isa_name(kt->isa) << " " << gguf::tensor_type_name(type) << " tokens=" << nt;
        ASSERT_EQ(0, std::memcmp(y1.data(), y3.data(), y1.size() * sizeof(float)));
      }
    }
  }
}

// Q4_0, Q5_0 and Q4_K matrices with an interleaved copy (interleave.h): tables with a
// kernel for it use the copy for every token count, the others ignore it;
// either way the result is close to the reference, the thread split does not
// change a bit, and from the packed GEMM's token counts on it equals the
// product without the copy exactly.
TEST(Matmul, InterleavedWeightsAreUsedOnlyWhereSupported) {
  ThreadPool one(1), two(2);
  for (TensorType type : {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q4_K}) {
    Weights w(type, 203, 512, 9);
    std::vector<uint8_t> storage(static_cast<size_t>(interleaved_bytes(w.view)) + 64);
    auto* packed = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(storage.data()) + 63) / 64 * 64);
    interleave_weights(w.view, packed);
    WeightView iw = w.view;
    iw.interleaved = packed;
    for (const KernelTable* kt : available_kernels()) {
      for (int64_t nt : {1, 3, 17, 64}) {
        const auto x = gaussian(nt * 512, 10);
        std::vector<float> plain(static_cast<size_t>(nt * 203)), y1(plain.size()), y2(plain.size()), ref(plain.size());
        matmul_with(*kt, w.view, x.data(), nt, plain.data(), two);
        matmul_with(*kt, iw, x.data(), nt, y1.data(), one);
        matmul_with(*kt, iw, x.data(), nt, y2.data(), two);
        matmul_ref(w.view, x.data(), nt, ref.data());
        const std::string what = std::string(isa_name(kt->isa)) + " " + std::string(gguf::tensor_type_name(type)) +
                                 " tokens=" + std::to_string(nt);
        ASSERT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float))) << what;
        if (kt->of(type).gemm_interleaved == nullptr || nt > kt->of(type).q16_row_max_tokens) {
          ASSERT_EQ(0, std::memcmp(plain.data(), y1.data(), y1.size() * sizeof(float))) << what;
        }
        // Within the int16 activations' rounding (bounded precisely in
        // IntegerDecodePathIsCloseToExactProduct); a wrong layout is off by O(1).
        for (size_t i = 0; i < ref.size(); ++i) {
          ASSERT_NEAR(y1[i], ref[i], 1e-2 * (1.0 + std::fabs(ref[i]))) << what << " at " << i;
        }
      }
    }
  }
}

// A prefill-sized product, large enough for several panels per thread, with
// several column chunks and token tiles, on every ISA and prefill path
// (int16 packed for Q4_K, FP32 packed for F16 at >= kPackedMinTokens).
TEST(Matmul, LargePrefillMatchesReference) {
  ThreadPool pool(2);
  for (const KernelTable* kt : available_kernels()) {
    for (TensorType type : {TensorType::Q4_K, TensorType::F16}) {
      Weights w(type, 150, 2048, 3);
      const int64_t nt = 100;
      const auto x = gaussian(nt * 2048, 4);
      const std::vector<float> xr = uses_q16(*kt, type, nt) ? Acts(x.data(), nt, 2048).rounded : x;
      std::vector<float> y(static_cast<size_t>(nt * 150)), ref(y.size());
      matmul_ref(w.view, xr.data(), nt, ref.data());
      matmul_with(*kt, w.view, x.data(), nt, y.data(), pool);
      expect_close(
          *kt, w.view, xr.data(), nt, y.data(), ref,
          std::string(isa_name(kt->isa)) + " " + std::string(gguf::tensor_type_name(type)) + " 150x2048 x 100");
    }
  }
}

// The AVX2 decoders reproduce the reference dequantization exactly (same
// float operations in the same order).
TEST(Matmul, FastDequantizeIsExact) {
  for (const KernelTable* kt : available_kernels()) {
    for (TensorType type : weight_types()) {
      const int64_t cols = gguf::tensor_type_info(type).block_size == 1 ? 77 : 1024;
      Weights w(type, 1, cols, 11);
      std::vector<float> a(static_cast<size_t>(cols) + 1, -7.0f), b(static_cast<size_t>(cols));
      kt->of(type).dequantize_row(w.bytes.data(), a.data(), cols);
      dequantize_row_ref(type, w.bytes.data(), b.data(), cols);
      for (int64_t c = 0; c < cols; ++c) {
        ASSERT_EQ(a[c], b[c]) << isa_name(kt->isa) << " " << gguf::tensor_type_name(type) << " c=" << c;
      }
      ASSERT_EQ(a[cols], -7.0f) << "wrote past the row";
    }
  }
}

TEST(Matmul, DequantizeWeightRowPicksTheRow) {
  Weights w(TensorType::Q8_0, 5, 64, 21);
  std::vector<float> got(64), want(64);
  dequantize_weight_row(w.view, 3, got.data());
  dequantize_row_ref(TensorType::Q8_0, w.bytes.data() + 3 * gguf::row_bytes(TensorType::Q8_0, 64), want.data(), 64);
  EXPECT_EQ(got, want);
}

// Hand-computed: W = [[1, 2], [3, 4], [-1, 0.5]] (F32), x = [[1, 1], [2, -1]].
TEST(Matmul, SmallHandComputed) {
  const float wd[6] = {1, 2, 3, 4, -1, 0.5f};
  const float x[4] = {1, 1, 2, -1};
  const WeightView w{TensorType::F32, wd, 3, 2};
  ThreadPool pool(2);
  for (const KernelTable* kt : available_kernels()) {
    float y[6];
    matmul_with(*kt, w, x, 2, y, pool);
    const float want[6] = {3, 7, -0.5f, 0, 2, -2.5f};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], want[i]) << isa_name(kt->isa) << " i=" << i;
  }
}

// matmul_many is the same arithmetic as separate calls, in one parallel
// region: mixed types (integer, float fused and packed paths in one call).
TEST(Matmul, ManyEqualsSeparateCalls) {
  ThreadPool pool(2);
  const int64_t cols = 512;
  Weights a(TensorType::Q4_K, 70, cols, 1), b(TensorType::F16, 33, cols, 2), c(TensorType::Q6_K, 256, cols, 3);
  const WeightView ws[3] = {a.view, b.view, c.view};
  for (const KernelTable* kt : available_kernels()) {
    for (int64_t nt : {1, 4, 5, 16, 100}) {
      const auto x = gaussian(nt * cols, 8);
      std::vector<float> many[3], single[3];
      float* ys[3];
      for (int i = 0; i < 3; ++i) {
        many[i].assign(static_cast<size_t>(nt * ws[i].rows), 0.0f);
        single[i].assign(many[i].size(), 1.0f);
        ys[i] = many[i].data();
        matmul_with(*kt, ws[i], x.data(), nt, single[i].data(), pool);
      }
      matmul_many_with(*kt, ws, x.data(), nt, ys, pool);
      for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(0, std::memcmp(many[i].data(), single[i].data(), many[i].size() * sizeof(float)))
            << isa_name(kt->isa) << " matrix " << i << " tokens " << nt;
      }
    }
  }
}

// The integer decode path against the exact product with the float x: the
// float rounding bound plus the activation rounding bound
// (matmul_test_util.h: activation_bound).
TEST(Matmul, IntegerDecodePathIsCloseToExactProduct) {
  bool any = false;
  for (const KernelTable* kt : available_kernels()) {
    if (kt->of(TensorType::Q4_0).q16_rows != nullptr) any = true;
  }
  if (!any) GTEST_SKIP() << "no kernel table with integer decode kernels on this CPU";
  ThreadPool pool(2);
  for (const KernelTable* kt : available_kernels()) {
    for (TensorType type : {TensorType::Q4_0, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K, TensorType::Q2_K}) {
      if (kt->of(type).q16_rows == nullptr) continue;
      const int64_t cols = 1024, rows = 20;
      Weights w(type, rows, cols, 31);
      // Activations with outliers, as real models have: a few values 100x the rest.
      auto x = gaussian(2 * cols, 32);
      for (int64_t c = 0; c < 2 * cols; c += 97) x[static_cast<size_t>(c)] *= 100.0f;
      std::vector<float> y(static_cast<size_t>(2 * rows)), ref(y.size());
      matmul_with(*kt, w.view, x.data(), 2, y.data(), pool);
      matmul_ref(w.view, x.data(), 2, ref.data());
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_weight_row(w.view, r, row.data());
        const std::vector<float> bias = bias_terms(w.view, r);
        for (int64_t t = 0; t < 2; ++t) {
          const float* xt = x.data() + t * cols;
          const double tol =
              rounding_bound(row, bias, xt, cols, cols / 8.0 + 16) + testing::activation_bound(row, xt, cols);
          EXPECT_NEAR(y[t * rows + r], ref[t * rows + r], tol)
              << isa_name(kt->isa) << " " << gguf::tensor_type_name(type) << " row " << r;
        }
      }
    }
  }
}

TEST(Matmul, EmptyShapes) {
  ThreadPool pool(2);
  const float x[4] = {1, 2, 3, 4};
  float y[4] = {5, 5, 5, 5};
  matmul(WeightView{TensorType::F32, x, 2, 2}, x, 0, y, pool);  // no tokens: y untouched
  EXPECT_EQ(y[0], 5.0f);
  matmul(WeightView{TensorType::F32, nullptr, 4, 0}, x, 1, y, pool);  // no columns: zeros
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace tokenmill::kernels
