// attention: every ISA against attention_ref (two-pass, double) for GQA
// ratios 1/2/4, full and sliding windows, soft-capping, queries at non-zero
// positions of a longer cache; plus hand-checkable cases.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/test_util.h"

namespace tokenmill::kernels {
namespace {

using testing::gaussian;

struct AttentionCase {
  AttentionShape shape;
  int64_t n_ctx;
  std::vector<int64_t> q_pos;
  std::vector<float> q, k, v;

  AttentionCase(AttentionShape s, int64_t ctx, std::vector<int64_t> pos, uint32_t seed)
      : shape(s), n_ctx(ctx), q_pos(std::move(pos)) {
    const auto nt = static_cast<int64_t>(q_pos.size());
    q = gaussian(nt * s.n_head * s.head_dim, seed);
    k = gaussian(ctx * s.n_kv_head * s.head_dim, seed + 1);
    v = gaussian(ctx * s.n_kv_head * s.head_dim, seed + 2);
  }
  int64_t num_tokens() const { return static_cast<int64_t>(q_pos.size()); }
  std::vector<float> run(const KernelTable& kt, ThreadPool& pool) const {
    std::vector<float> out(q.size());
    attention_with(kt, shape, q.data(), q_pos.data(), num_tokens(), k.data(), v.data(), n_ctx, out.data(), pool);
    return out;
  }
  std::vector<float> ref() const {
    std::vector<float> out(q.size());
    attention_ref(shape, q.data(), q_pos.data(), num_tokens(), k.data(), v.data(), n_ctx, out.data());
    return out;
  }
};

// Error budget per (token, head): each score is a float dot product, off by
// at most (head_dim + 8) 2^-24 scale sum_d |q_d k_d| (sequential scalar sum;
// the AVX2 one is tighter); tanh capping does not amplify it. A score error
// ds moves every softmax weight by a relative ~2 ds. exp adds 2 ulp and the
// float running sums over L keys (weights and weighted v) L + 8 roundings.
// The output, a convex combination of v rows, is then within
// max|v| (2 ds + (L + 16) 2^-24 + 1e-6).
void expect_close(const AttentionCase& c, const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  const AttentionShape& s = c.shape;
  const int64_t hd = s.head_dim;
  const int64_t group = s.n_head / s.n_kv_head;
  const int64_t stride = s.n_kv_head * hd;
  const double u = std::ldexp(1.0, -24);
  for (int64_t t = 0; t < c.num_tokens(); ++t) {
    for (int64_t h = 0; h < s.n_head; ++h) {
      const int64_t p = c.q_pos[t];
      const int64_t j0 = s.window > 0 ? std::max<int64_t>(0, p - s.window + 1) : 0;
      double max_qk = 0, max_v = 0;
      for (int64_t j = j0; j <= p; ++j) {
        double qk = 0;
        for (int64_t d = 0; d < hd; ++d) {
          const size_t kv = static_cast<size_t>(j * stride + (h / group) * hd + d);
          qk += std::fabs(double(c.q[(t * s.n_head + h) * hd + d]) * c.k[kv]);
          max_v = std::max(max_v, std::fabs(double(c.v[kv])));
        }
        max_qk = std::max(max_qk, qk);
      }
      const double ds = (hd + 8) * u * std::fabs(s.scale) * max_qk;
      const double tol = max_v * (2 * ds + (p - j0 + 1 + 16) * u + 1e-6);
      for (int64_t d = 0; d < hd; ++d) {
        const size_t i = static_cast<size_t>((t * s.n_head + h) * hd + d);
        ASSERT_NEAR(got[i], want[i], tol) << what << " t=" << t << " h=" << h << " d=" << d;
      }
    }
  }
}

TEST(Attention, MatchesReference) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (const KernelTable* kt : available_kernels()) {
    for (int64_t n_kv : {4, 2, 1}) {  // GQA ratios 1, 2, 4
      for (int64_t hd : {19, 64}) {
        for (int64_t window : {0, 1, 5, 100}) {
          for (float softcap : {0.0f, 3.0f}) {
            for (float scale : {1.0f / std::sqrt(float(hd)), 2.0f}) {
              AttentionShape s{4, n_kv, hd, scale, window, softcap};
              // Queries deep into a 150-entry cache (crossing 64-key chunks),
              // plus the first positions.
              AttentionCase c(s, 150, {0, 1, 63, 64, 65, 100, 149}, seed++);
              const std::string what = std::string(isa_name(kt->isa)) + " n_kv=" + std::to_string(n_kv) +
                                       " hd=" + std::to_string(hd) + " window=" + std::to_string(window) +
                                       " softcap=" + std::to_string(softcap) + " scale=" + std::to_string(scale);
              expect_close(c, c.run(*kt, pool), c.ref(), what);
            }
          }
        }
      }
    }
  }
}

TEST(Attention, Gemma3LikeShape) {
  ThreadPool pool(2);
  AttentionShape s{4, 1, 256, 1.0f / 16.0f, 512, 0.0f};
  std::vector<int64_t> pos;
  for (int64_t p = 600; p < 616; ++p) pos.push_back(p);  // a prefill chunk after 600 cached tokens
  AttentionCase c(s, 616, pos, 77);
  for (const KernelTable* kt : available_kernels()) expect_close(c, c.run(*kt, pool), c.ref(), "gemma3-like");
}

TEST(Attention, ThreadCountDoesNotChangeResults) {
  ThreadPool one(1), two(2), three(3);
  AttentionShape s{8, 2, 32, 0.2f, 0, 0.0f};
  std::vector<int64_t> pos;
  for (int64_t p = 0; p < 40; ++p) pos.push_back(p);
  AttentionCase c(s, 40, pos, 5);
  for (const KernelTable* kt : available_kernels()) {
    const auto a = c.run(*kt, one), b = c.run(*kt, two), d = c.run(*kt, three);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << isa_name(kt->isa);
    ASSERT_EQ(0, std::memcmp(a.data(), d.data(), a.size() * sizeof(float))) << isa_name(kt->isa);
  }
}

// window = 1: each query sees only its own position, so out = v[p] exactly.
TEST(Attention, WindowOfOneReturnsOwnValue) {
  ThreadPool pool(2);
  AttentionShape s{2, 1, 12, 0.3f, 1, 0.0f};
  AttentionCase c(s, 20, {3, 17}, 9);
  for (const KernelTable* kt : available_kernels()) {
    const auto out = c.run(*kt, pool);
    for (int64_t t = 0; t < 2; ++t) {
      for (int64_t h = 0; h < 2; ++h) {
        for (int64_t d = 0; d < 12; ++d) {
          EXPECT_EQ(out[(t * 2 + h) * 12 + d], c.v[c.q_pos[t] * 12 + d]) << isa_name(kt->isa);
        }
      }
    }
  }
}

// q = 0: all scores equal, so out is the plain mean of the visible v rows;
// keys after the query position must not count.
TEST(Attention, ZeroQueryAveragesVisibleValuesOnly) {
  ThreadPool pool(2);
  AttentionShape s{1, 1, 9, 1.0f, 0, 0.0f};
  AttentionCase c(s, 30, {10}, 3);
  std::fill(c.q.begin(), c.q.end(), 0.0f);
  for (const KernelTable* kt : available_kernels()) {
    const auto before = c.run(*kt, pool);
    for (int64_t d = 0; d < 9; ++d) {
      double mean = 0;
      for (int64_t j = 0; j <= 10; ++j) mean += c.v[j * 9 + d];
      EXPECT_NEAR(before[d], mean / 11, 1e-6) << isa_name(kt->isa);
    }
    AttentionCase future = c;
    for (size_t i = 11 * 9; i < future.v.size(); ++i) future.v[i] = 1e6f, future.k[i] = 1e3f;
    EXPECT_EQ(future.run(*kt, pool), before) << "keys after the query leaked in";
  }
}

}  // namespace
}  // namespace tokenmill::kernels
