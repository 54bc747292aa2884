// The attention mass paged_attention adds to key_mass (the heavy-hitter KV
// policy's score): on F32 and F16 storage every ISA against a float64
// softmax of the stored keys, on the quantized caches every ISA against
// the scalar kernel (whose reading of them paged_attention_quant_test
// checks); the output is bit-identical with and without the mass; each
// query head's weights sum to 1; keys outside a window get none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/paged_attention.h"
#include "kernels/test_util.h"
#include "util/fp16.h"

namespace tokenmill::kernels {
namespace {

using kv::KvDtype;
using testing::gaussian;

struct MassCase {
  AttentionShape shape;
  int64_t n_ctx = 0;
  int64_t block_size = 16;
  std::vector<int64_t> q_pos;
  std::vector<float> q, k, v;  // k, v: [n_ctx, n_kv_dim]

  MassCase(AttentionShape s, int64_t ctx, int64_t bs, std::vector<int64_t> pos, uint32_t seed)
      : shape(s), n_ctx(ctx), block_size(bs), q_pos(std::move(pos)) {
    q = gaussian(num_tokens() * s.n_head * s.head_dim, seed);
    k = gaussian(ctx * kv_dim(), seed + 1, 1.5f);
    v = gaussian(ctx * kv_dim(), seed + 2);
  }
  int64_t num_tokens() const { return static_cast<int64_t>(q_pos.size()); }
  int64_t kv_dim() const { return shape.n_kv_head * shape.head_dim; }
};

// A pool holding the case's K/V in `dtype`, blocks in reversed order.
struct MassPool {
  std::vector<uint8_t> k, v;
  std::vector<int32_t> table;
  PagedKv kv;
  MassPool(const MassCase& c, KvDtype dtype) {
    const int64_t needed = (c.n_ctx + c.block_size - 1) / c.block_size;
    const int64_t blocks = needed + 2;
    k.assign(static_cast<size_t>(blocks * c.block_size * kv::kv_row_bytes(dtype, c.kv_dim())), 0);
    v = k;
    table.resize(static_cast<size_t>(needed));
    std::iota(table.rbegin(), table.rend(), 1);
    kv = PagedKv{k.data(), v.data(), dtype, c.block_size, c.kv_dim(), blocks};
    paged_kv_write(kv, table, 0, c.n_ctx, c.k.data(), c.v.data());
  }
};

struct Result {
  std::vector<float> out, mass;
};

Result run(const KernelTable& kt, const MassCase& c, const MassPool& p, ThreadPool& pool, bool with_mass) {
  Result r;
  r.out.assign(static_cast<size_t>(c.num_tokens() * c.shape.n_head * c.shape.head_dim), 0.0f);
  if (with_mass) r.mass.assign(static_cast<size_t>(c.n_ctx), 0.0f);
  paged_attention_with(kt, c.shape, c.q.data(), c.q_pos.data(), c.num_tokens(), p.kv, p.table, c.n_ctx, r.out.data(),
                       pool, 0, with_mass ? r.mass.data() : nullptr);
  return r;
}

// The mass in float64 from keys as stored (F32 exact, F16 rounded).
std::vector<double> reference_mass(const MassCase& c, bool f16) {
  const AttentionShape& s = c.shape;
  const int64_t hd = s.head_dim;
  const int64_t group = s.n_head / s.n_kv_head;
  std::vector<double> mass(static_cast<size_t>(c.n_ctx), 0.0);
  for (int64_t t = 0; t < c.num_tokens(); ++t) {
    const int64_t p = c.q_pos[static_cast<size_t>(t)];
    const int64_t j0 = s.first_visible(p);
    for (int64_t h = 0; h < s.n_head; ++h) {
      std::vector<double> sc;
      for (int64_t j = j0; j <= p; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d) {
          float kk = c.k[static_cast<size_t>(j * c.kv_dim() + (h / group) * hd + d)];
          if (f16) kk = fp16_to_fp32(fp32_to_fp16(kk));
          dot += double(c.q[static_cast<size_t>((t * s.n_head + h) * hd + d)]) * kk;
        }
        double x = dot * s.scale;
        if (s.softcap > 0) x = s.softcap * std::tanh(x / s.softcap);
        sc.push_back(x);
      }
      const double mx = *std::max_element(sc.begin(), sc.end());
      double sum = 0;
      for (double& x : sc) sum += (x = std::exp(x - mx));
      for (size_t i = 0; i < sc.size(); ++i) mass[static_cast<size_t>(j0) + i] += sc[i] / sum;
    }
  }
  return mass;
}

std::vector<MassCase> cases() {
  std::vector<MassCase> out;
  // stories260K-like (GQA 2, head_dim 8), a prefill chunk mid-sequence; head
  // size 64 with GQA 4 (the AVX-512 kernel's shape); Gemma-like head 256
  // with a window; soft-capping with an odd head size; 16 query heads per
  // KV head (split into parts); block size 3 (chunks spanning blocks).
  out.emplace_back(AttentionShape{8, 4, 8, 0.35f, 0, 0.0f}, 90, 16, std::vector<int64_t>{40, 41, 42, 89}, 10);
  out.emplace_back(AttentionShape{8, 2, 64, 0.125f, 0, 0.0f}, 150, 16, std::vector<int64_t>{149}, 11);
  out.emplace_back(AttentionShape{4, 1, 256, 0.0625f, 50, 0.0f}, 130, 16, std::vector<int64_t>{70, 129}, 12);
  out.emplace_back(AttentionShape{2, 2, 20, 0.2f, 0, 5.0f}, 70, 16, std::vector<int64_t>{0, 33, 69}, 13);
  out.emplace_back(AttentionShape{16, 1, 32, 0.17f, 0, 0.0f}, 100, 3, std::vector<int64_t>{64, 99}, 14);
  return out;
}

TEST(PagedAttentionMass, FloatCachesMatchFloat64SoftmaxOnEveryIsa) {
  ThreadPool pool(2);
  for (const MassCase& c : cases()) {
    for (KvDtype dtype : {KvDtype::F32, KvDtype::F16}) {
      const MassPool p(c, dtype);
      const std::vector<double> want = reference_mass(c, dtype == KvDtype::F16);
      for (const KernelTable* kt : available_kernels()) {
        const Result r = run(*kt, c, p, pool, true);
        const std::string what = std::string(isa_name(kt->isa)) + " hd=" + std::to_string(c.shape.head_dim);
        double total = 0;
        for (int64_t j = 0; j < c.n_ctx; ++j) {
          // Each weight is within a few float ulps of its softmax (exp's
          // own error included); the mass sums at most tokens x heads.
          ASSERT_NEAR(r.mass[static_cast<size_t>(j)], want[static_cast<size_t>(j)],
                      2e-5 * (1 + want[static_cast<size_t>(j)]))
              << what;
          total += r.mass[static_cast<size_t>(j)];
        }
        EXPECT_NEAR(total, double(c.num_tokens() * c.shape.n_head), 1e-4 * c.num_tokens() * c.shape.n_head) << what;
      }
    }
  }
}

TEST(PagedAttentionMass, QuantizedCachesMatchTheScalarKernel) {
  ThreadPool pool(2);
  for (const MassCase& c : cases()) {
    for (KvDtype dtype : {KvDtype::Q8_0, KvDtype::FP8_E4M3, KvDtype::Q4_0}) {
      const MassPool p(c, dtype);
      const Result want = run(scalar_kernels(), c, p, pool, true);
      for (const KernelTable* kt : available_kernels()) {
        const Result r = run(*kt, c, p, pool, true);
        for (int64_t j = 0; j < c.n_ctx; ++j)
          ASSERT_NEAR(r.mass[static_cast<size_t>(j)], want.mass[static_cast<size_t>(j)],
                      2e-5 * (1 + want.mass[static_cast<size_t>(j)]))
              << isa_name(kt->isa) << " dtype " << static_cast<int>(dtype) << " hd=" << c.shape.head_dim;
      }
    }
  }
}

TEST(PagedAttentionMass, OutputIsTheSameWithAndWithoutMass) {
  ThreadPool pool(2);
  for (const MassCase& c : cases()) {
    for (KvDtype dtype : {KvDtype::F32, KvDtype::F16, KvDtype::Q8_0, KvDtype::Q4_0}) {
      const MassPool p(c, dtype);
      for (const KernelTable* kt : available_kernels()) {
        const Result with = run(*kt, c, p, pool, true);
        const Result without = run(*kt, c, p, pool, false);
        ASSERT_EQ(with.out, without.out) << isa_name(kt->isa) << " hd=" << c.shape.head_dim;
      }
    }
  }
}

TEST(PagedAttentionMass, KeysOutsideEveryWindowGetNoMassAndMassAccumulates) {
  ThreadPool pool(2);
  const MassCase c(AttentionShape{4, 2, 16, 0.25f, 8, 0.0f}, 40, 4, {30, 39}, 20);
  const MassPool p(c, KvDtype::F32);
  for (const KernelTable* kt : available_kernels()) {
    std::vector<float> out(static_cast<size_t>(c.num_tokens() * 4 * 16));
    std::vector<float> mass(static_cast<size_t>(c.n_ctx), 1.0f);  // added to, not overwritten
    paged_attention_with(*kt, c.shape, c.q.data(), c.q_pos.data(), c.num_tokens(), p.kv, p.table, c.n_ctx, out.data(),
                         pool, 0, mass.data());
    for (int64_t j = 0; j < c.n_ctx; ++j) {
      const bool seen = (j >= 23 && j <= 30) || j >= 32;
      if (seen)
        EXPECT_GT(mass[static_cast<size_t>(j)], 1.0f) << isa_name(kt->isa) << " j=" << j;
      else
        EXPECT_EQ(mass[static_cast<size_t>(j)], 1.0f) << isa_name(kt->isa) << " j=" << j;
    }
  }
}

}  // namespace
}  // namespace tokenmill::kernels
