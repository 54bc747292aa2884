// ops.h: the scalar references against hand-computed values, then every
// ISA's version against the references over sizes 0..40 and two large ones,
// at every misalignment of 0..7 floats.
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"

namespace tokenmill::kernels {
namespace {

std::vector<int64_t> sizes() {
  std::vector<int64_t> s;
  for (int64_t n = 0; n <= 40; ++n) s.push_back(n);
  s.push_back(4096);
  s.push_back(5632);
  return s;
}

// A buffer whose data() is `offset` floats past a 64-byte boundary.
struct Buf {
  Buf(int64_t n, int offset) : storage(static_cast<size_t>(n + 32)), off(offset) {
    const auto addr = reinterpret_cast<uintptr_t>(storage.data());
    off += static_cast<int>(((64 - addr % 64) % 64) / sizeof(float));
  }
  float* data() { return storage.data() + off; }
  std::vector<float> storage;
  int off;
};

std::vector<float> random_vec(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

std::string where(const KernelTable* kt, int64_t n, int off, int64_t i) {
  return std::string(isa_name(kt->isa)) + " n=" + std::to_string(n) + " off=" + std::to_string(off) +
         " i=" + std::to_string(i);
}

TEST(OpsRef, HandComputedValues) {
  float x[4] = {1, 2, 3, 4};
  float out[4];
  rms_norm_ref(x, nullptr, out, 4, 0.0f);  // rms = sqrt(30 / 4)
  EXPECT_NEAR(out[0], 0.36514837f, 1e-7);
  EXPECT_NEAR(out[3], 1.46059349f, 1e-6);
  const float w[4] = {2, 2, 2, -1};
  rms_norm_ref(x, w, out, 4, 0.0f);
  EXPECT_NEAR(out[0], 0.73029674f, 1e-6);
  EXPECT_NEAR(out[3], -1.46059349f, 1e-6);

  float g[3] = {1.0f, -2.0f, 0.0f};
  const float up[3] = {1.0f, 3.0f, 5.0f};
  swiglu_ref(g, up, 3);
  EXPECT_NEAR(g[0], 0.7310585786f, 1e-7);       // 1 / (1 + e^-1)
  EXPECT_NEAR(g[1], 3 * -0.2384058440f, 1e-6);  // -2 / (1 + e^2)
  EXPECT_EQ(g[2], 0.0f);

  float h[2] = {1.0f, -0.5f};
  const float one[2] = {1.0f, 2.0f};
  geglu_tanh_ref(h, one, 2);
  EXPECT_NEAR(h[0], 0.8411919906f, 1e-7);
  EXPECT_NEAR(h[1], 2 * -0.1542859902f, 1e-6);

  float s[3] = {1, 2, 3};
  softmax_ref(s, 3);
  EXPECT_NEAR(s[0], 0.0900305732f, 1e-7);
  EXPECT_NEAR(s[1], 0.2447284711f, 1e-7);
  EXPECT_NEAR(s[2], 0.6652409558f, 1e-7);
  float big[2] = {1000.0f, 1000.0f};  // stable: no overflow
  softmax_ref(big, 2);
  EXPECT_FLOAT_EQ(big[0], 0.5f);
}

TEST(Ops, RmsNormMatchesReference) {
  for (const KernelTable* kt : available_kernels()) {
    for (int64_t n : sizes()) {
      for (int off = 0; off < 8; ++off) {
        const auto x = random_vec(n, 1 + static_cast<uint32_t>(n), -3, 3);
        const auto w = random_vec(n, 2, 0.5f, 1.5f);
        for (bool with_w : {true, false}) {
          Buf xb(n, off), wb(n, (off + 3) % 8), ob(n, (off + 5) % 8);
          std::copy(x.begin(), x.end(), xb.data());
          std::copy(w.begin(), w.end(), wb.data());
          std::vector<float> ref(static_cast<size_t>(n));
          rms_norm_ref(x.data(), with_w ? w.data() : nullptr, ref.data(), n, 1e-6f);
          kt->rms_norm(xb.data(), with_w ? wb.data() : nullptr, ob.data(), n, 1e-6f);
          // Both sum squares in double; they differ only in the order of
          // double additions (which can move the float 1/rms by an ulp) and
          // then share two float products: within 3 ulp.
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_NEAR(ob.data()[i], ref[i], 4e-7 * std::fabs(ref[i])) << where(kt, n, off, i);
          }
          // In place (out aliases x).
          kt->rms_norm(xb.data(), with_w ? wb.data() : nullptr, xb.data(), n, 1e-6f);
          for (int64_t i = 0; i < n; ++i) ASSERT_EQ(xb.data()[i], ob.data()[i]);
        }
      }
    }
  }
}

// Gated activations: the AVX2 exp is within 2 ulp, and 1 + e, the division
// and g * up add 3 roundings: 1e-6 relative. GEGLU forms its sigmoid
// argument z = g (c1 + c2 g^2) in float (3 roundings, 3.6e-7 |z| absolute),
// and x * sigmoid(z) has relative sensitivity (1 - sigmoid(z)) <= 1 to z:
// hence the 4e-7 |z| term. Near the underflow clamp (z < -87) the results
// are below 1e-36 in magnitude, covered by the absolute 1e-30.
void check_gated(bool gelu) {
  for (const KernelTable* kt : available_kernels()) {
    for (int64_t n : sizes()) {
      for (int off = 0; off < 8; ++off) {
        auto g = random_vec(n, 10 + static_cast<uint32_t>(n), -12, 12);
        const auto up = random_vec(n, 11, -2, 2);
        if (n > 3) g[0] = 0.0f, g[1] = -100.0f, g[2] = 100.0f;
        Buf gb(n, off), ub(n, 7 - off);
        std::copy(g.begin(), g.end(), gb.data());
        std::copy(up.begin(), up.end(), ub.data());
        std::vector<float> ref = g;
        (gelu ? geglu_tanh_ref : swiglu_ref)(ref.data(), up.data(), n);
        (gelu ? kt->geglu_tanh : kt->swiglu)(gb.data(), ub.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          const double gi = g[i];
          const double z = gelu ? gi * (1.5957691216 + 0.0713548163 * gi * gi) : gi;
          const double tol = std::fabs(ref[i]) * (1e-6 + (gelu ? 4e-7 * std::fabs(z) : 0.0)) + 1e-30;
          ASSERT_NEAR(gb.data()[i], ref[i], tol) << where(kt, n, off, i) << " g=" << g[i];
        }
      }
    }
  }
}

TEST(Ops, SwigluMatchesReference) { check_gated(false); }
TEST(Ops, GegluTanhMatchesReference) { check_gated(true); }

// Softmax: the reference subtracts the max in double; the AVX2 version in
// float, which moves exp's argument by up to ulp(|x - max|)/2 (6e-8 |x - max|
// relative after exp). Then exp (2 ulp), the double sum and the final float
// product: 6e-7 + 6e-8 |x - max| relative.
TEST(Ops, SoftmaxMatchesReference) {
  for (const KernelTable* kt : available_kernels()) {
    for (int64_t n : sizes()) {
      for (int off = 0; off < 8; ++off) {
        auto x = random_vec(n, 20 + static_cast<uint32_t>(n), -30, 10);
        if (n > 2) x[n - 1] = 15.0f;  // max in the tail
        Buf xb(n, off);
        std::copy(x.begin(), x.end(), xb.data());
        std::vector<float> ref = x;
        softmax_ref(ref.data(), n);
        kt->softmax(xb.data(), n);
        double total = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double tol = std::fabs(ref[i]) * (6e-7 + 6e-8 * std::fabs(x[i] - 15.0)) + 1e-37;
          ASSERT_NEAR(xb.data()[i], ref[i], tol) << where(kt, n, off, i);
          total += xb.data()[i];
        }
        if (n > 0) {
          EXPECT_NEAR(total, 1.0, 1e-5);
        }
      }
    }
  }
}

// Element-wise add and scale are one float operation each: exact.
TEST(Ops, AddAndScaleAreExact) {
  for (const KernelTable* kt : available_kernels()) {
    for (int64_t n : sizes()) {
      for (int off = 0; off < 8; ++off) {
        const auto x = random_vec(n, 30, -5, 5);
        const auto y = random_vec(n, 31, -5, 5);
        Buf xb(n, off), yb(n, (off * 3) % 8);
        std::copy(x.begin(), x.end(), xb.data());
        std::copy(y.begin(), y.end(), yb.data());
        const float guard = yb.data()[n];
        kt->add_inplace(yb.data(), xb.data(), n);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(yb.data()[i], y[i] + x[i]) << where(kt, n, off, i);
        ASSERT_EQ(yb.data()[n], guard) << "wrote past the end";
        kt->scale_inplace(xb.data(), -0.37f, n);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(xb.data()[i], x[i] * -0.37f) << where(kt, n, off, i);
      }
    }
  }
}

TEST(Ops, PublicEntryPointsUseActiveTable) {
  std::vector<float> a = {1, 2, 3}, b = {1, 2, 3};
  softmax(a.data(), 3);
  active_kernels().softmax(b.data(), 3);
  EXPECT_EQ(a, b);
}

TEST(Rope, PositionZeroIsIdentity) {
  std::vector<float> h = {0.5f, -1.0f, 2.0f, 3.0f};
  const auto orig = h;
  rope(h.data(), 4, 4, 0, 10000.0f, 1.0f, nullptr, false);
  EXPECT_EQ(h, orig);
}

// head_dim 4, base 10000: pair 0 turns by pos, pair 1 by pos * 10000^(-1/2).
TEST(Rope, NormalPairingHandComputed) {
  std::vector<float> h = {1, 0, 1, 0};
  rope(h.data(), 4, 4, 1, 10000.0f, 1.0f, nullptr, false);
  EXPECT_NEAR(h[0], std::cos(1.0), 1e-7);
  EXPECT_NEAR(h[1], std::sin(1.0), 1e-7);
  EXPECT_NEAR(h[2], std::cos(0.01), 1e-7);
  EXPECT_NEAR(h[3], std::sin(0.01), 1e-7);
}

TEST(Rope, NeoxPairingHandComputed) {
  std::vector<float> h = {1, 1, 0, 0, 7};  // dim 4 rotated by pairs (0,2), (1,3); 7 untouched
  rope(h.data(), 5, 4, 1, 10000.0f, 1.0f, nullptr, true);
  EXPECT_NEAR(h[0], std::cos(1.0), 1e-7);
  EXPECT_NEAR(h[2], std::sin(1.0), 1e-7);
  EXPECT_NEAR(h[1], std::cos(0.01), 1e-7);
  EXPECT_NEAR(h[3], std::sin(0.01), 1e-7);
  EXPECT_EQ(h[4], 7.0f);
}

// theta_i = pos * freq_scale * base^(-2i/d) / freq_factors[i].
TEST(Rope, FreqScaleAndFactors) {
  const float factors[2] = {2.0f, 4.0f};
  std::vector<float> h = {0, 1, 0, 1};
  rope(h.data(), 4, 4, 3, 100.0f, 0.5f, factors, false);
  const double t0 = 3 * 0.5 / 2.0, t1 = 3 * 0.5 * 0.1 / 4.0;
  EXPECT_NEAR(h[0], -std::sin(t0), 1e-7);
  EXPECT_NEAR(h[1], std::cos(t0), 1e-7);
  EXPECT_NEAR(h[2], -std::sin(t1), 1e-7);
  EXPECT_NEAR(h[3], std::cos(t1), 1e-7);
}

// At large positions the angle must be formed in double: pos 100000 turns
// pair 0 by 1e5 rad, where a float angle would be off by ~4e-3.
TEST(Rope, LargePositionAccurate) {
  std::vector<float> h = {1, 0};
  rope(h.data(), 2, 2, 100000, 10000.0f, 1.0f, nullptr, false);
  EXPECT_NEAR(h[0], std::cos(100000.0), 2e-7);
  EXPECT_NEAR(h[1], std::sin(100000.0), 2e-7);
}

TEST(Rope, PartialRotationLeavesTailAndPreservesNorm) {
  auto h = random_vec(64, 40, -1, 1);
  const auto orig = h;
  rope(h.data(), 64, 32, 12345, 10000.0f, 1.0f, nullptr, true);
  double n0 = 0, n1 = 0;
  for (int i = 0; i < 32; ++i) n0 += double(orig[i]) * orig[i], n1 += double(h[i]) * h[i];
  EXPECT_NEAR(n1, n0, 1e-5);
  for (int i = 32; i < 64; ++i) EXPECT_EQ(h[i], orig[i]);
}

}  // namespace
}  // namespace tokenmill::kernels
