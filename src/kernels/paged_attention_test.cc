// paged_attention: every ISA against attention_ref (two-pass, double) on the
// same K/V laid out contiguously, over block sizes 1, 3 and 16, shuffled
// block tables in a pool larger than the sequence, F32 and F16 storage, GQA
// ratios 1/2/4/8/16, windows, soft-capping and queries starting mid-block;
// plus exact cases: bit equality with the contiguous scalar kernel, thread
// and group-split invariance, never reading outside the visible range.
#include "kernels/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/test_util.h"
#include "util/fp16.h"

namespace tokenmill::kernels {
namespace {

using kv::KvDtype;

using testing::gaussian;

// What F16 storage keeps of a value.
std::vector<float> fp16_rounded(std::vector<float> x) {
  for (float& f : x) f = fp16_to_fp32(fp32_to_fp16(f));
  return x;
}

// A pool of `num_blocks` blocks for one layer, and a shuffled block table
// that covers n_ctx positions with blocks scattered over the pool.
struct Pool {
  std::vector<uint8_t> k, v;
  std::vector<int32_t> table;
  PagedKv kv;

  Pool(KvDtype dtype, int64_t block_size, int64_t n_kv_dim, int64_t n_ctx, uint32_t seed) {
    const int64_t needed = (n_ctx + block_size - 1) / block_size;
    const int64_t num_blocks = needed + 5;
    const size_t bytes = static_cast<size_t>(num_blocks * block_size * n_kv_dim * (dtype == KvDtype::F16 ? 2 : 4));
    k.assign(bytes, 0xff);  // all-ones halves and floats are NaN: unwritten rows poison any read
    v.assign(bytes, 0xff);
    std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
    table.assign(ids.begin(), ids.begin() + needed);
    kv = PagedKv{k.data(), v.data(), dtype, block_size, n_kv_dim, num_blocks};
  }
};

struct PagedCase {
  AttentionShape shape;
  int64_t n_ctx;
  std::vector<int64_t> q_pos;
  std::vector<float> q, k, v;  // k, v: [n_ctx, n_kv_head, head_dim] contiguous

  PagedCase(AttentionShape s, int64_t ctx, std::vector<int64_t> pos, uint32_t seed)
      : shape(s), n_ctx(ctx), q_pos(std::move(pos)) {
    q = gaussian(num_tokens() * s.n_head * s.head_dim, seed);
    k = gaussian(ctx * kv_dim(), seed + 1);
    v = gaussian(ctx * kv_dim(), seed + 2);
  }
  int64_t num_tokens() const { return static_cast<int64_t>(q_pos.size()); }
  int64_t kv_dim() const { return shape.n_kv_head * shape.head_dim; }

  // Writes K/V in two pieces split mid-block, as a prefill then a later chunk would.
  Pool paged(KvDtype dtype, int64_t block_size, uint32_t seed) const {
    Pool p(dtype, block_size, kv_dim(), n_ctx, seed);
    const int64_t split = std::min<int64_t>(n_ctx, block_size + 1 + n_ctx / 3);
    paged_kv_write(p.kv, p.table, 0, split, k.data(), v.data());
    paged_kv_write(p.kv, p.table, split, n_ctx - split, k.data() + split * kv_dim(), v.data() + split * kv_dim());
    return p;
  }
  std::vector<float> run(const KernelTable& kt, const Pool& p, ThreadPool& pool) const {
    std::vector<float> out(q.size());
    paged_attention_with(kt, shape, q.data(), q_pos.data(), num_tokens(), p.kv, p.table, n_ctx, out.data(), pool);
    return out;
  }
  std::vector<float> ref(const std::vector<float>& kk, const std::vector<float>& vv) const {
    std::vector<float> out(q.size());
    attention_ref(shape, q.data(), q_pos.data(), num_tokens(), kk.data(), vv.data(), n_ctx, out.data());
    return out;
  }
};

// Error budget per (token, head), as in attention_test.cc: each score is a
// float dot product, off by at most (head_dim + 8) 2^-24 scale sum_d |q_d k_d|;
// a score error ds moves every softmax weight by a relative ~2 ds; exp adds
// 2 ulp and the float running sums over L keys L + 8 roundings. The output, a
// convex combination of v rows, is within max|v| (2 ds + (L + 16) 2^-24 + 1e-6).
// k and v are what the kernel actually read (fp16-rounded for F16 storage),
// so the same bound holds for both dtypes.
void expect_close(const PagedCase& c, const std::vector<float>& k, const std::vector<float>& v,
                  const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  const AttentionShape& s = c.shape;
  const int64_t hd = s.head_dim;
  const int64_t group = s.n_head / s.n_kv_head;
  const int64_t stride = c.kv_dim();
  const double u = std::ldexp(1.0, -24);
  for (int64_t t = 0; t < c.num_tokens(); ++t) {
    for (int64_t h = 0; h < s.n_head; ++h) {
      const int64_t p = c.q_pos[t];
      const int64_t j0 = s.window > 0 ? std::max<int64_t>(0, p - s.window + 1) : 0;
      double max_qk = 0, max_v = 0;
      for (int64_t j = j0; j <= p; ++j) {
        double qk = 0;
        for (int64_t d = 0; d < hd; ++d) {
          const size_t i = static_cast<size_t>(j * stride + (h / group) * hd + d);
          qk += std::fabs(double(c.q[(t * s.n_head + h) * hd + d]) * k[i]);
          max_v = std::max(max_v, std::fabs(double(v[i])));
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

std::string describe(const KernelTable& kt, KvDtype dtype, int64_t bs, const AttentionShape& s) {
  return std::string(isa_name(kt.isa)) + " " + std::string(dtype == KvDtype::F16 ? "f16" : "f32") +
         " bs=" + std::to_string(bs) + " n_head=" + std::to_string(s.n_head) + " n_kv=" + std::to_string(s.n_kv_head) +
         " hd=" + std::to_string(s.head_dim) + " window=" + std::to_string(s.window) +
         " softcap=" + std::to_string(s.softcap);
}

TEST(PagedAttention, MatchesReference) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (KvDtype dtype : {KvDtype::F32, KvDtype::F16}) {
    for (int64_t bs : {1, 3, 16}) {
      for (int64_t n_kv : {4, 2, 1}) {  // GQA ratios 1, 2, 4
        for (int64_t hd : {19, 64}) {
          for (int64_t window : {0, 5, 40}) {
            for (float softcap : {0.0f, 3.0f}) {
              AttentionShape s{4, n_kv, hd, 1.0f / std::sqrt(float(hd)), window, softcap};
              // A decode-like scatter of positions and a prefill chunk
              // starting mid-block, in a 100-position context (two 64-key chunks).
              PagedCase c(s, 100, {0, 2, 17, 63, 64, 65, 66, 67, 99}, seed++);
              const std::vector<float> k = dtype == KvDtype::F16 ? fp16_rounded(c.k) : c.k;
              const std::vector<float> v = dtype == KvDtype::F16 ? fp16_rounded(c.v) : c.v;
              const std::vector<float> want = c.ref(k, v);
              const Pool p = c.paged(dtype, bs, seed);
              for (const KernelTable* kt : available_kernels()) {
                expect_close(c, k, v, c.run(*kt, p, pool), want, describe(*kt, dtype, bs, s));
              }
            }
          }
        }
      }
    }
  }
}

// Groups of 8 (one call) and 16 (split in two calls of kMaxPagedGroup), head
// sizes around the vector width, and for the AVX-512 kernel 48 (32 + 16
// columns of V), 256 (its largest) and 272 (past it: the AVX2 kernel).
TEST(PagedAttention, LargeGroupsAndOddHeadSizes) {
  ThreadPool pool(3);
  uint32_t seed = 100;
  for (KvDtype dtype : {KvDtype::F32, KvDtype::F16}) {
    for (int64_t n_head : {8, 16}) {
      for (int64_t hd : {1, 7, 8, 16, 24, 33, 48, 256, 272}) {
        AttentionShape s{n_head, 1, hd, 0.5f, 0, 0.0f};
        PagedCase c(s, 70, {3, 30, 69}, seed++);
        const std::vector<float> k = dtype == KvDtype::F16 ? fp16_rounded(c.k) : c.k;
        const std::vector<float> v = dtype == KvDtype::F16 ? fp16_rounded(c.v) : c.v;
        const Pool p = c.paged(dtype, 3, seed);
        for (const KernelTable* kt : available_kernels()) {
          expect_close(c, k, v, c.run(*kt, p, pool), c.ref(k, v), describe(*kt, dtype, 3, s));
        }
      }
    }
  }
}

// The scalar paged kernel does exactly the operations of the contiguous
// scalar kernel, so with F32 storage the results are bit-identical.
TEST(PagedAttention, ScalarF32EqualsContiguousScalarExactly) {
  ThreadPool pool(2);
  AttentionShape s{4, 2, 24, 0.3f, 9, 0.0f};
  PagedCase c(s, 50, {0, 8, 9, 30, 49}, 7);
  const Pool p = c.paged(KvDtype::F32, 3, 7);
  std::vector<float> want(c.q.size());
  attention_with(scalar_kernels(), s, c.q.data(), c.q_pos.data(), c.num_tokens(), c.k.data(), c.v.data(), c.n_ctx,
                 want.data(), pool);
  const std::vector<float> got = c.run(scalar_kernels(), p, pool);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
}

// One token, one KV head, 8 query heads: 1, 2, 3 and 5 threads split the
// group into 1, 2, 4 and 8 calls. Every head's result must not change.
// head_dim 40 and 48 (the AVX-512 kernel takes multiples of 16).
TEST(PagedAttention, ThreadCountAndGroupSplitDoNotChangeResults) {
  ThreadPool one(1), two(2), three(3), five(5);
  for (int64_t hd : {40, 48}) {
    AttentionShape s{8, 1, hd, 0.2f, 0, 0.0f};
    PagedCase c(s, 90, {89}, 5);
    for (KvDtype dtype : {KvDtype::F32, KvDtype::F16}) {
      const Pool p = c.paged(dtype, 16, 5);
      for (const KernelTable* kt : available_kernels()) {
        const auto a = c.run(*kt, p, one);
        for (ThreadPool* tp : {&two, &three, &five}) {
          const auto b = c.run(*kt, p, *tp);
          ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
              << isa_name(kt->isa) << " threads=" << tp->num_threads() << " hd=" << hd;
        }
      }
    }
  }
}

// Positions before every query's window and after the last query are NaN in
// the pool (blocks before the window hold nothing else): any read of them
// would turn the output into NaN.
TEST(PagedAttention, ReadsOnlyVisiblePositions) {
  ThreadPool pool(2);
  AttentionShape s{2, 1, 16, 0.25f, 6, 0.0f};
  PagedCase c(s, 60, {40, 41, 45}, 11);
  const int64_t kv = c.kv_dim();
  std::vector<float> poisoned_k = c.k, poisoned_v = c.v;
  for (int64_t j = 0; j < c.n_ctx; ++j) {
    if (j >= 35 && j <= 45) continue;  // visible to some query: [40-5, 45]
    for (int64_t d = 0; d < kv; ++d) {
      poisoned_k[j * kv + d] = std::numeric_limits<float>::quiet_NaN();
      poisoned_v[j * kv + d] = std::numeric_limits<float>::quiet_NaN();
    }
  }
  for (KvDtype dtype : {KvDtype::F32, KvDtype::F16}) {
    PagedCase poisoned = c;
    poisoned.k = poisoned_k;
    poisoned.v = poisoned_v;
    const Pool p = poisoned.paged(dtype, 4, 3);
    const std::vector<float> k = dtype == KvDtype::F16 ? fp16_rounded(c.k) : c.k;
    const std::vector<float> v = dtype == KvDtype::F16 ? fp16_rounded(c.v) : c.v;
    for (const KernelTable* kt : available_kernels()) {
      const auto got = poisoned.run(*kt, p, pool);
      for (float x : got) ASSERT_TRUE(std::isfinite(x)) << isa_name(kt->isa);
      expect_close(c, k, v, got, c.ref(k, v), describe(*kt, dtype, 4, s));
    }
  }
}

// window = 1: each query sees only its own position, so out = v[p] exactly
// (as stored: fp16-rounded for F16).
TEST(PagedAttention, WindowOfOneReturnsOwnValue) {
  ThreadPool pool(2);
  AttentionShape s{2, 1, 12, 0.3f, 1, 0.0f};
  PagedCase c(s, 20, {3, 17}, 9);
  for (KvDtype dtype : {KvDtype::F32, KvDtype::F16}) {
    const Pool p = c.paged(dtype, 3, 1);
    const std::vector<float> v = dtype == KvDtype::F16 ? fp16_rounded(c.v) : c.v;
    for (const KernelTable* kt : available_kernels()) {
      const auto out = c.run(*kt, p, pool);
      for (int64_t t = 0; t < 2; ++t) {
        for (int64_t h = 0; h < 2; ++h) {
          for (int64_t d = 0; d < 12; ++d) {
            EXPECT_EQ(out[(t * 2 + h) * 12 + d], v[c.q_pos[t] * 12 + d]) << isa_name(kt->isa);
          }
        }
      }
    }
  }
}

// A sliding-window table that released its first blocks (first_block > 0)
// gives bit-identical results to the full table, with every ISA; a window
// starting before the held blocks aborts.
TEST(PagedAttention, TableWithReleasedLeadingBlocksMatchesFullTable) {
  ThreadPool pool(2);
  AttentionShape s{4, 2, 8, 0.35f, 7, 0.0f};
  const int64_t bs = 3;
  PagedCase c(s, 40, {30, 33, 39}, 21);  // windows start at 24: logical blocks 8.. are needed
  for (KvDtype dtype : {KvDtype::F32, KvDtype::F16}) {
    const Pool p = c.paged(dtype, bs, 5);
    for (int64_t first : {int64_t{0}, int64_t{5}, int64_t{8}}) {
      const std::vector<int32_t> tail(p.table.begin() + first, p.table.end());
      for (const KernelTable* kt : available_kernels()) {
        std::vector<float> want(c.q.size()), got(c.q.size());
        paged_attention_with(*kt, s, c.q.data(), c.q_pos.data(), c.num_tokens(), p.kv, p.table, c.n_ctx, want.data(),
                             pool);
        paged_attention_with(*kt, s, c.q.data(), c.q_pos.data(), c.num_tokens(), p.kv, tail, c.n_ctx, got.data(), pool,
                             first);
        EXPECT_EQ(got, want) << isa_name(kt->isa) << " first block " << first;
      }
    }
    const std::vector<int32_t> too_short(p.table.begin() + 9, p.table.end());
    std::vector<float> out(c.q.size());
    EXPECT_DEATH(
        paged_attention(s, c.q.data(), c.q_pos.data(), c.num_tokens(), p.kv, too_short, c.n_ctx, out.data(), pool, 9),
        "window starts before the table");
  }
  // Writing through an offset table lands in the same rows as the full table.
  const Pool full = c.paged(KvDtype::F32, bs, 5);
  Pool offset = c.paged(KvDtype::F32, bs, 5);
  std::fill(offset.k.begin(), offset.k.end(), 0);
  std::fill(offset.v.begin(), offset.v.end(), 0);
  const std::vector<int32_t> tail(offset.table.begin() + 4, offset.table.end());
  paged_kv_write(offset.kv, tail, 12, c.n_ctx - 12, c.k.data() + 12 * c.kv_dim(), c.v.data() + 12 * c.kv_dim(), 4);
  for (int64_t pos = 12; pos < c.n_ctx; ++pos) {
    const size_t row = static_cast<size_t>((full.table[pos / bs] * bs + pos % bs) * c.kv_dim() * 4);
    EXPECT_EQ(std::memcmp(full.k.data() + row, offset.k.data() + row, static_cast<size_t>(c.kv_dim() * 4)), 0) << pos;
  }
}

// paged_kv_write puts row p at table[p / bs] * bs + p % bs, rounding to
// fp16 for F16 storage, and touches nothing else.
TEST(PagedKvWrite, PlacesRowsThroughTheTable) {
  const int64_t dim = 3;
  std::vector<float> k = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 1.0f / 3.0f};
  std::vector<float> v = {-1.0f, -2.0f, -3.0f, -4.0f, -5.0f, -6.0f, -7.0f, -8.0f, -9.0f};
  const std::vector<int32_t> table = {2, 0};  // bs 2: positions 0,1 -> block 2; 2,3 -> block 0
  std::vector<float> kf(4 * 2 * dim, 0.0f), vf(4 * 2 * dim, 0.0f);
  PagedKv kv{reinterpret_cast<uint8_t*>(kf.data()), reinterpret_cast<uint8_t*>(vf.data()), KvDtype::F32, 2, dim, 4};
  paged_kv_write(kv, table, 1, 3, k.data(), v.data());  // positions 1, 2, 3
  const std::vector<float> want_k = {4, 5, 6, 7, 8, 1.0f / 3.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(kf, want_k);
  EXPECT_EQ(vf[15], -1.0f);
  EXPECT_EQ(vf[0], -4.0f);

  std::vector<uint16_t> kh(4 * 2 * dim, 0), vh(4 * 2 * dim, 0);
  kv = PagedKv{reinterpret_cast<uint8_t*>(kh.data()), reinterpret_cast<uint8_t*>(vh.data()), KvDtype::F16, 2, dim, 4};
  paged_kv_write(kv, table, 1, 3, k.data(), v.data());
  EXPECT_EQ(kh[15], 0x3c00);  // 1.0
  EXPECT_EQ(kh[5], 0x3555);   // 1/3 rounded to nearest fp16 (0.333251953125)
  EXPECT_EQ(vh[0], 0xc400);   // -4.0
  EXPECT_EQ(kh[12], 0);       // position 0 (block 2, slot 0) was not written
}

}  // namespace
}  // namespace tokenmill::kernels
