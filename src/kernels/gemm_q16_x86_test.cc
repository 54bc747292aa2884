// The int16 prefill path (gemm.h and avx2/avx2.h: pack_q16_rows,
// gemm_q16_packed; the AVX2 table's rows: q16_decode_row, pack_q16_blocks,
// gemm_interleaved). The decoded rows must describe the reference weights
// (w = scale16 * q + bias16 per 16 columns); the packed kernel's integer
// sums are exact and its float steps are few and fixed, so the scalar
// reference of those steps (gemm.h: gemm_q16_ref) is exact: results must
// match bit for bit over row counts around the 16-row groups, column counts
// across the 256-column chunks, every q16 type and 1..7, 12, 13 and 64
// tokens, for the AVX2 and the AVX-512 kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/avx2/avx2.h"
#if !defined(TOKENMILL_NO_AVX512_KERNELS)
#include "kernels/avx512/avx512.h"
#endif
#include "kernels/dispatch.h"
#include "kernels/gemm.h"
#include "kernels/interleave.h"
#include "kernels/test_util.h"

namespace tokenmill::kernels {
namespace {

using gguf::TensorType;

// The AVX2 table's row for `type` (callers skip without AVX2).
const TypeKernels& avx2_row(TensorType type) { return kernels_for(Isa::kAvx2)->of(type); }

// Rows decoded by the AVX2 q16_decode_row: q [rows, cols], scale16 / bias16
// [rows, cols / 16].
struct Decoded {
  Decoded(const WeightView& w) : q(w.rows * w.cols), scale(w.rows * w.cols / 16), bias(scale.size()) {
    const int64_t rb = gguf::row_bytes(w.type, w.cols), h = w.cols / 16;
    const TypeKernels::Q16DecodeRow decode_row = avx2_row(w.type).q16_decode_row;
    for (int64_t r = 0; r < w.rows; ++r) {
      decode_row(static_cast<const uint8_t*>(w.data) + r * rb, w.cols, q.data() + r * w.cols, scale.data() + r * h,
                 bias.data() + r * h);
    }
  }
  std::vector<int16_t> q;
  std::vector<float> scale, bias;
};

TEST(GemmQ16, DecodedRowsDescribeTheReferenceWeights) {
  if (!cpu_features().supports_avx2_kernels()) GTEST_SKIP() << "no AVX2";
  for (TensorType type : testing::kBlockQuantTypes) {
    const int64_t cols = 512;
    testing::Weights w(type, 3, cols, 5);
    const Decoded dec(w.view);
    std::vector<float> ref(cols);
    for (int64_t r = 0; r < 3; ++r) {
      dequantize_weight_row(w.view, r, ref.data());
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t h = r * cols / 16 + c / 16;
        const double got = double(dec.scale[h]) * dec.q[r * cols + c] + dec.bias[h];
        // The reference rounds d * sc, the product and the minimum in float:
        // a few ulps of the larger term.
        const double tol =
            4 * std::ldexp(std::fabs(double(dec.scale[h]) * dec.q[r * cols + c]) + std::fabs(dec.bias[h]), -24);
        ASSERT_NEAR(got, ref[c], tol + 1e-30) << gguf::tensor_type_name(type) << " r " << r << " c " << c;
      }
    }
  }
}

// The reference results of the int16 GEMM (gemm_q16_ref) for the decoded
// rows of dec: y [num_tokens, y_stride], entries past the rows left at -1.
std::vector<float> reference(const Decoded& dec, int64_t rows, int64_t cols, const Q16Layout& layout,
                             const QuantizedActs& a, int64_t num_tokens, int64_t y_stride) {
  std::vector<float> y(static_cast<size_t>(num_tokens * y_stride), -1.0f);
  gemm_q16_ref(dec.q.data(), dec.scale.data(), dec.bias.data(), layout, rows, cols, a, num_tokens, y.data(), y_stride);
  return y;
}

using GemmQ16Fn = void (*)(const int16_t*, const float*, const float*, bool, int, int64_t, int64_t,
                           const QuantizedActs&, int64_t, float*, int64_t);

void check_against_reference(GemmQ16Fn gemm, const char* isa) {
  for (TensorType type : testing::kBlockQuantTypes) {
    const bool k_quant = gguf::tensor_type_info(type).block_size == 256;
    const Q16Layout layout = q16_layout(type);
    for (int64_t rows : {1, 7, 16, 17, 37}) {
      for (int64_t cols : k_quant ? std::vector<int64_t>{256, 768} : std::vector<int64_t>{32, 96, 288, 640}) {
        testing::Weights w(type, rows, cols, static_cast<uint32_t>(rows * 7 + cols));
        const Decoded dec(w.view);
        const int64_t padded = (rows + kPackRows - 1) / kPackRows * kPackRows;
        auto* pq = static_cast<int16_t*>(std::aligned_alloc(64, static_cast<size_t>(padded * cols * 2)));
        std::vector<float> ps(padded * cols / 16), pb(ps.size());
        for (int64_t i = 0; i < padded; i += kPackStep) {
          const int64_t n = std::max<int64_t>(0, std::min(kPackStep, rows - i));
          avx2::pack_q16_rows(dec.q.data() + i * cols, dec.scale.data() + i * cols / 16,
                              dec.bias.data() + i * cols / 16, n, cols, i, padded, pq, ps.data(), pb.data());
        }
        for (int64_t nt : {1, 2, 3, 4, 5, 6, 7, 12, 13, 64, 300}) {
          if (nt == 300 && cols < 640) continue;
          const auto x = testing::gaussian(nt * cols, static_cast<uint32_t>(nt + cols));
          const testing::Acts acts(x.data(), nt, cols);
          const int64_t ys = rows + 5;
          std::vector<float> y(static_cast<size_t>(nt * ys), -1.0f);
          gemm(pq, ps.data(), pb.data(), layout.halves, layout.bias, rows, cols, acts.buffer.view(), nt, y.data(), ys);
          const std::vector<float> want = reference(dec, rows, cols, layout, acts.buffer.view(), nt, ys);
          for (int64_t t = 0; t < nt; ++t) {
            for (int64_t r = 0; r < ys; ++r) {
              const std::string what = std::string(isa) + " " + std::string(gguf::tensor_type_name(type)) + " rows " +
                                       std::to_string(rows) + " cols " + std::to_string(cols) + " tokens " +
                                       std::to_string(nt) + " r " + std::to_string(r) + " t " + std::to_string(t);
              ASSERT_EQ(y[t * ys + r], want[t * ys + r]) << what;
            }
          }
        }
        std::free(pq);
      }
    }
  }
}

// A panel packed straight from the blocks equals the two-step decode +
// pack_q16_rows panel, byte for byte (int16 values, scales, biases, the
// zero rows of a partial group), over partial pack steps, several 256-column
// chunks, and blocks whose scale is +0 or -0.
TEST(GemmQ16, DirectPackEqualsDecodeThenPack) {
  if (!cpu_features().supports_avx2_kernels()) GTEST_SKIP() << "no AVX2";
  EXPECT_EQ(avx2_row(TensorType::Q4_K).pack_q16_blocks, nullptr);
  const TypeKernels::PackQ16Blocks pack_q16_blocks = avx2_row(TensorType::Q4_0).pack_q16_blocks;
  ASSERT_NE(pack_q16_blocks, nullptr);
  for (int64_t rows : {1, 7, 8, 16, 17, 37}) {
    for (int64_t cols : {32, 96, 288, 640}) {
      testing::Weights w(TensorType::Q4_0, rows, cols, static_cast<uint32_t>(rows * 11 + cols));
      const int64_t rb = gguf::row_bytes(TensorType::Q4_0, cols);
      w.bytes[0] = w.bytes[1] = 0;                               // row 0, block 0: d = +0
      w.bytes[static_cast<size_t>((rows - 1) * rb + 1)] = 0x80;  // last row, block 0: d = -0
      w.bytes[static_cast<size_t>((rows - 1) * rb)] = 0;
      const Decoded dec(w.view);
      const int64_t padded = (rows + kPackRows - 1) / kPackRows * kPackRows;
      const size_t nq = static_cast<size_t>(padded * cols), nf = static_cast<size_t>(padded * cols / 16);
      auto* q_two = static_cast<int16_t*>(std::aligned_alloc(64, nq * 2));
      auto* q_one = static_cast<int16_t*>(std::aligned_alloc(64, nq * 2));
      std::fill(q_two, q_two + nq, int16_t{-7});
      std::fill(q_one, q_one + nq, int16_t{-7});
      std::vector<float> s_two(nf, -3.0f), b_two(nf, -3.0f), s_one(nf, -3.0f), b_one(nf, -3.0f);
      for (int64_t i = 0; i < padded; i += kPackStep) {
        const int64_t n = std::max<int64_t>(0, std::min(kPackStep, rows - i));
        avx2::pack_q16_rows(dec.q.data() + i * cols, dec.scale.data() + i * cols / 16, dec.bias.data() + i * cols / 16,
                            n, cols, i, padded, q_two, s_two.data(), b_two.data());
        pack_q16_blocks(w.bytes.data() + i * rb, rb, n, cols, i, padded, q_one, s_one.data(), b_one.data());
      }
      const std::string what = "rows " + std::to_string(rows) + " cols " + std::to_string(cols);
      EXPECT_EQ(std::memcmp(q_two, q_one, nq * 2), 0) << what;
      EXPECT_EQ(std::memcmp(s_two.data(), s_one.data(), nf * 4), 0) << what;
      EXPECT_EQ(std::memcmp(b_two.data(), b_one.data(), nf * 4), 0) << what;
      std::free(q_two);
      std::free(q_one);
    }
  }
}

// Q4_0, Q5_0 (AVX2), Q8_0, Q4_K and Q6_K weights interleaved at load (interleave.h) and
// multiplied by an ISA's interleaved kernels give the int16 path's numerics
// bit for bit, for whole matrices and for row ranges (the units matmul
// hands to threads), with tokens 1..7, 12, 13, 64 (token tiles of 3 or 6,
// column chunks of 256, walked group by group) and 300 (from 640 columns
// on: a block of 256 tokens with more than 256 KiB of activations, walked
// chunk by chunk, then a block of 44 walked group by group).
// y is checked for writes past the call's rows: [num_tokens, rows] and a
// guard after it.
void check_interleaved(const KernelTable& kt, const std::vector<TensorType>& types) {
  for (TensorType type : types) {
    const bool super_blocks = type == TensorType::Q4_K || type == TensorType::Q6_K;
    const Q16Layout layout = q16_layout(type);
    const TypeKernels::GemmInterleaved gemm = kt.of(type).gemm_interleaved;
    ASSERT_NE(gemm, nullptr) << isa_name(kt.isa) << " " << gguf::tensor_type_name(type);
    for (int64_t rows : {1, 7, 16, 17, 37, 48}) {
      for (int64_t cols : super_blocks ? std::vector<int64_t>{256, 768} : std::vector<int64_t>{32, 96, 288, 640}) {
        testing::Weights w(type, rows, cols, static_cast<uint32_t>(rows * 5 + cols));
        const Decoded dec(w.view);
        const int64_t bytes = interleaved_bytes(w.view);
        // The same bytes as the rows padded to 16, but for Q4_K's unpacked
        // scales (64 bytes per 16 rows and 256 columns).
        const int64_t extra = type == TensorType::Q4_K ? (rows + 15) / 16 * cols / 4 : 0;
        ASSERT_EQ(bytes, (rows + 15) / 16 * 16 * gguf::row_bytes(type, cols) + extra);
        auto* packed = static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>((bytes + 63) / 64 * 64)));
        interleave_weights(w.view, packed);
        WeightView view = w.view;
        view.interleaved = packed;
        for (int64_t nt : {1, 2, 3, 4, 5, 6, 7, 12, 13, 64, 300}) {
          if (nt == 300 && cols < 640) continue;
          const auto x = testing::gaussian(nt * cols, static_cast<uint32_t>(3 * nt + cols));
          const testing::Acts acts(x.data(), nt, cols);
          constexpr int64_t kGuard = 8;
          // The whole matrix, then the rows from 16 on in a second call.
          const int64_t split = rows > 16 ? 16 : rows;
          std::vector<float> y(static_cast<size_t>(nt * rows + kGuard), -1.0f);
          gemm(view, 0, split, acts.buffer.view(), nt, y.data());
          if (split < rows) gemm(view, split, rows, acts.buffer.view(), nt, y.data());
          const std::vector<float> want = reference(dec, rows, cols, layout, acts.buffer.view(), nt, rows);
          for (int64_t t = 0; t < nt; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              ASSERT_EQ(y[t * rows + r], want[t * rows + r])
                  << gguf::tensor_type_name(type) << " rows " << rows << " cols " << cols << " tokens " << nt << " r "
                  << r << " t " << t;
            }
          }
          for (int64_t g = 0; g < kGuard; ++g) ASSERT_EQ(y[nt * rows + g], -1.0f) << "write past the rows";
        }
        std::free(packed);
      }
    }
  }
}

TEST(GemmQ16, InterleavedMatchesReferenceBitForBit) {
  if (!cpu_features().supports_avx2_kernels()) GTEST_SKIP() << "no AVX2";
  check_interleaved(*kernels_for(Isa::kAvx2),
                    {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K});
}

TEST(GemmQ16, Avx512InterleavedMatchesReferenceBitForBit) {
  if (kernels_for(Isa::kAvx512) == nullptr) GTEST_SKIP() << "no AVX-512 F/BW/VNNI on this CPU, or not in this build";
  check_interleaved(*kernels_for(Isa::kAvx512),
                    {TensorType::Q4_0, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K});
}

TEST(GemmQ16, MatchesReferenceBitForBit) {
  if (!cpu_features().supports_avx2_kernels()) GTEST_SKIP() << "no AVX2";
  check_against_reference(avx2::gemm_q16_packed, "avx2");
}

// The 512-bit kernel keeps the AVX2 kernel's float steps, so it must give
// the same bits (6 tokens per tile: the token counts cover 1..7 and tails).
TEST(GemmQ16, Avx512MatchesReferenceBitForBit) {
#if defined(TOKENMILL_NO_AVX512_KERNELS)
  GTEST_SKIP() << "this build has no AVX-512 kernels (TOKENMILL_AVX512_KERNELS=OFF)";
#else
  if (!cpu_features().supports_avx512_kernels()) GTEST_SKIP() << "no AVX-512 F/BW/VNNI on this CPU";
  check_against_reference(avx512::gemm_q16_packed, "avx512");
#endif
}

}  // namespace
}  // namespace tokenmill::kernels
