// Quantized paged KV (Q8_0, FP8 E4M3, Q4_0): the stored bytes for a known row, the
// per-element error bound of each dtype (written by paged_kv_write, read back
// by every ISA's attention kernel), attention on quantized storage
// (every ISA) against attention_ref on the values the scales and codes
// represent (decoded independently here), and against the F32 cache within a
// tolerance: the "KV quantized attention vs F32" check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/fp8.h"
#include "kernels/paged_attention.h"
#include "kernels/quant_blocks.h"
#include "kernels/test_util.h"
#include "util/fp16.h"

namespace tokenmill::kernels {
namespace {

using kv::KvDtype;

// (kv_dtype_name lives in the kv library, which the kernels do not link.)
const char* name(KvDtype dtype) {
  return dtype == KvDtype::Q8_0 ? "q8_0" : dtype == KvDtype::Q4_0 ? "q4_0" : "fp8_e4m3";
}

constexpr KvDtype kQuantized[] = {KvDtype::Q8_0, KvDtype::FP8_E4M3, KvDtype::Q4_0};

// Q4_0 (kv/kv_dtype.h), decoded independently of the kernels: per group
// d = fp16(m / -8) for the element m of largest magnitude, values
// d * (clamp(round(x / d) + 8, 0, 15) - 8).
void stored_q4(const float* x, int64_t g, float* out) {
  float m = 0;
  for (int64_t i = 0; i < g; ++i)
    if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
  const float d = fp16_to_fp32(fp32_to_fp16(m / -8.0f));
  for (int64_t i = 0; i < g; ++i)
    out[i] = d == 0 ? 0.0f : d * (std::clamp(std::nearbyint(x[i] / d) + 8.0f, 0.0f, 15.0f) - 8.0f);
}

// What quantized storage keeps of a row of n values: per group an fp16
// scale amax / qmax, codes rounded to nearest (int8) or to E4M3; Q4_0 as
// stored_q4.
std::vector<float> stored_values(KvDtype dtype, const std::vector<float>& x, int64_t n) {
  std::vector<float> out(x.size());
  const int64_t g = kv::kv_quant_group(n);
  if (dtype == KvDtype::Q4_0) {
    for (size_t base = 0; base < x.size(); base += static_cast<size_t>(g)) stored_q4(&x[base], g, &out[base]);
    return out;
  }
  const bool fp8 = dtype == KvDtype::FP8_E4M3;
  for (size_t base = 0; base < x.size(); base += static_cast<size_t>(g)) {
    float amax = 0;
    for (int64_t i = 0; i < g; ++i) amax = std::max(amax, std::fabs(x[base + i]));
    const float d = fp16_to_fp32(fp32_to_fp16(amax / (fp8 ? 448.0f : 127.0f)));
    for (int64_t i = 0; i < g; ++i) {
      const float y = d > 0 ? x[base + i] / d : 0.0f;
      out[base + i] =
          d * (fp8 ? fp8_e4m3_to_fp32(fp32_to_fp8_e4m3(y)) : std::clamp(std::nearbyint(y), -127.0f, 127.0f));
    }
  }
  return out;
}

using testing::gaussian;

struct QuantPool {
  std::vector<uint8_t> k, v;
  std::vector<int32_t> table;
  PagedKv kv;
  QuantPool(KvDtype dtype, int64_t bs, int64_t n_kv_dim, int64_t n_ctx) {
    const int64_t blocks = (n_ctx + bs - 1) / bs + 2;
    k.assign(static_cast<size_t>(blocks * bs * kv::kv_row_bytes(dtype, n_kv_dim)), 0xff);
    v = k;
    table.resize(static_cast<size_t>((n_ctx + bs - 1) / bs));
    std::iota(table.rbegin(), table.rend(), 1);  // reversed, skipping block 0
    kv = PagedKv{k.data(), v.data(), dtype, bs, n_kv_dim, blocks};
  }
};

TEST(PagedKvQuant, RowBytesAndLayout) {
  EXPECT_EQ(kv::kv_row_bytes(KvDtype::Q8_0, 256), 256 + 16);
  EXPECT_EQ(kv::kv_row_bytes(KvDtype::FP8_E4M3, 32), 34);
  EXPECT_EQ(kv::kv_row_bytes(KvDtype::Q8_0, 40), 42);  // one group: the whole row
  EXPECT_EQ(kv::kv_row_bytes(KvDtype::F16, 40), 80);
  // Q8_0 rows of 32 are GGUF Q8_0 blocks: x = 0..31 -> d = fp16(31 / 127).
  std::vector<float> x(32);
  std::iota(x.begin(), x.end(), 0.0f);
  QuantPool p(KvDtype::Q8_0, 1, 32, 1);
  paged_kv_write(p.kv, p.table, 0, 1, x.data(), x.data());
  BlockQ8_0 b;
  std::memcpy(&b, p.k.data() + p.table[0] * 34, 34);
  EXPECT_EQ(b.d, fp32_to_fp16(31.0f / 127.0f));
  const float d = fp16_to_fp32(b.d);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(b.qs[i], static_cast<int8_t>(std::nearbyint(i / d))) << i;
  EXPECT_EQ(b.qs[31], 127);
  // Q4_0 rows of 32 are GGUF Q4_0 blocks: x = 0..31 -> d = fp16(31 / -8),
  // byte j holds elements j (low nibble) and j + 16 (high nibble); 31 is
  // stored exactly as code 0 (-8).
  QuantPool p4(KvDtype::Q4_0, 1, 32, 1);
  paged_kv_write(p4.kv, p4.table, 0, 1, x.data(), x.data());
  ASSERT_EQ(kv::kv_row_bytes(KvDtype::Q4_0, 32), static_cast<int64_t>(sizeof(BlockQ4_0)));
  BlockQ4_0 b4;
  std::memcpy(&b4, p4.k.data() + p4.table[0] * sizeof(BlockQ4_0), sizeof(BlockQ4_0));
  EXPECT_EQ(b4.d, fp32_to_fp16(31.0f / -8.0f));
  const float d4 = fp16_to_fp32(b4.d);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(b4.qs[j] & 0x0F, std::clamp(static_cast<int>(std::nearbyint(j / d4)) + 8, 0, 15)) << j;
    EXPECT_EQ(b4.qs[j] >> 4, std::clamp(static_cast<int>(std::nearbyint((j + 16) / d4)) + 8, 0, 15)) << j + 16;
  }
  EXPECT_EQ(b4.qs[15] >> 4, 0);
}

// The values the attention kernel `kt` reads from the V rows of positions
// [0, n_ctx) of `kv`: attention with a window of one key returns, for every
// query, the V row at its own position (one key: softmax weight 1), so this
// is the kernels' own dequantization (scalar load_elems, AVX2 dequant_slice),
// which the tests cannot call directly. One query head per KV head.
// Returns [n_ctx, n_kv_dim].
std::vector<float> decoded_v_rows(const KernelTable& kt, const PagedKv& kv, std::span<const int32_t> table,
                                  int64_t head_dim, int64_t n_ctx, ThreadPool& pool) {
  const int64_t heads = kv.n_kv_dim / head_dim;
  const AttentionShape one_key{heads, heads, head_dim, 1.0f, /*window=*/1, 0.0f};
  std::vector<int64_t> pos(static_cast<size_t>(n_ctx));
  std::iota(pos.begin(), pos.end(), 0);
  const std::vector<float> q(static_cast<size_t>(n_ctx * kv.n_kv_dim), 0.0f);
  std::vector<float> out(q.size());
  paged_attention_with(kt, one_key, q.data(), pos.data(), n_ctx, kv, table, n_ctx, out.data(), pool);
  return out;
}

// Per element, the error of a value written by paged_kv_write and read back
// by the attention kernels; groups of 32 (a 64-wide row of two 32-wide heads).
void expect_element_errors(KvDtype dtype, const std::vector<float>& x, const std::vector<float>& r,
                           const std::string& what) {
  for (size_t g = 0; g < x.size(); g += 32) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[g + i]));
    for (int i = 0; i < 32; ++i) {
      const float e = std::fabs(x[g + i] - r[g + i]);
      // q8_0: half a step amax/127 (plus the fp16 rounding of the scale);
      // q4_0: half a step amax/8, or a whole step for the clamped +8 end;
      // fp8: half an ulp of 3 mantissa bits, or the subnormal step.
      const float bound = dtype == KvDtype::Q8_0   ? amax / 127.0f * 0.5f + amax * 1e-3f
                          : dtype == KvDtype::Q4_0 ? amax / 8.0f + amax * 1e-3f
                                                   : std::max(std::fabs(x[g + i]) / 16.0f, amax / 448.0f / 1024.0f) +
                                                         std::fabs(x[g + i]) * 1e-3f;
      EXPECT_LE(e, bound) << what << " element " << g + i << " " << x[g + i] << " read as " << r[g + i];
    }
  }
}

// Rows go through the production path: paged_kv_write into a pool (blocks
// of 3, so the 4 positions span two blocks of a reversed table), read back
// by each ISA's attention kernel. K rows are read by swapping the K and V
// arrays, so that the kernel decodes the stored K bytes as values.
TEST(PagedKvQuant, ElementErrorBounds) {
  constexpr int64_t kPositions = 4, kKvDim = 64, kHeadDim = 32;
  const std::vector<float> k = gaussian(kPositions * kKvDim, 21), v = gaussian(kPositions * kKvDim, 22);
  ThreadPool pool(2);
  for (KvDtype dtype : kQuantized) {
    QuantPool p(dtype, 3, kKvDim, kPositions);
    paged_kv_write(p.kv, p.table, 0, kPositions, k.data(), v.data());
    PagedKv keys_as_values = p.kv;
    std::swap(keys_as_values.k, keys_as_values.v);
    for (const KernelTable* kt : available_kernels()) {
      const std::string what = std::string(isa_name(kt->isa)) + " " + name(dtype);
      expect_element_errors(dtype, v, decoded_v_rows(*kt, p.kv, p.table, kHeadDim, kPositions, pool), what + " V");
      expect_element_errors(dtype, k, decoded_v_rows(*kt, keys_as_values, p.table, kHeadDim, kPositions, pool),
                            what + " K");
    }
  }
}

void check_case(KvDtype dtype, const AttentionShape& s, int64_t bs, int64_t n_ctx, uint32_t seed, ThreadPool& pool) {
  const int64_t kv_dim = s.n_kv_head * s.head_dim;
  std::vector<int64_t> pos = {0, 5, n_ctx / 2, n_ctx - 2, n_ctx - 1};
  const int64_t T = static_cast<int64_t>(pos.size());
  const std::vector<float> q = gaussian(T * s.n_head * s.head_dim, seed);
  const std::vector<float> k = gaussian(n_ctx * kv_dim, seed + 1);
  const std::vector<float> v = gaussian(n_ctx * kv_dim, seed + 2);
  QuantPool p(dtype, bs, kv_dim, n_ctx);
  paged_kv_write(p.kv, p.table, 0, 7, k.data(), v.data());
  paged_kv_write(p.kv, p.table, 7, n_ctx - 7, k.data() + 7 * kv_dim, v.data() + 7 * kv_dim);
  const std::vector<float> kq = stored_values(dtype, k, kv_dim), vq = stored_values(dtype, v, kv_dim);
  std::vector<float> want(q.size()), exact(q.size());
  attention_ref(s, q.data(), pos.data(), T, kq.data(), vq.data(), n_ctx, want.data());
  attention_ref(s, q.data(), pos.data(), T, k.data(), v.data(), n_ctx, exact.data());
  // Quantized K/V are fed to the kernel; max |v| ~ 4 for these Gaussians.
  const double f32_tol = dtype == KvDtype::Q8_0 ? 0.05 : dtype == KvDtype::Q4_0 ? 0.4 : 0.3;
  for (const KernelTable* kt : available_kernels()) {
    std::vector<float> got(q.size());
    paged_attention_with(*kt, s, q.data(), pos.data(), T, p.kv, p.table, n_ctx, got.data(), pool);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 2e-4) << isa_name(kt->isa) << " " << name(dtype) << " hd=" << s.head_dim;
      worst = std::max(worst, std::fabs(double(got[i]) - exact[i]));
    }
    EXPECT_LT(worst, f32_tol) << isa_name(kt->isa) << " " << name(dtype) << " hd=" << s.head_dim;
  }
}

TEST(PagedKvQuant, AttentionMatchesReferenceOnStoredValuesAndF32WithinTolerance) {
  ThreadPool pool(2);
  uint32_t seed = 40;
  for (KvDtype dtype : kQuantized) {
    // head_dim 8 with 4 KV heads (one group spans all heads, as stories260K),
    // 64 (two groups per head), 256 with GQA 4 (Gemma 3), 20 x 2 = 40 (one
    // group per row, not a multiple of 32), 48 x 2 (heads straddle groups).
    const AttentionShape shapes[] = {{8, 4, 8, 0.35f, 0, 0.0f},
                                     {4, 2, 64, 0.125f, 0, 0.0f},
                                     {4, 1, 256, 0.0625f, 50, 0.0f},
                                     {2, 2, 20, 0.2f, 0, 5.0f},
                                     {4, 2, 48, 0.15f, 0, 0.0f}};
    for (const AttentionShape& s : shapes) check_case(dtype, s, 16, 90, seed++, pool);
    check_case(dtype, shapes[1], 3, 150, seed++, pool);  // chunks spanning many small blocks
  }
}

}  // namespace
}  // namespace tokenmill::kernels
