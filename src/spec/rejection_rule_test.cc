#include "spec/rejection_rule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

namespace tokenmill::spec {
namespace {

using Probs = std::vector<float>;

// Target p and proposer q that disagree everywhere: q puts mass on a token p
// rules out (id 5), p on one q never proposes (id 0).
const Probs kP = {0.30f, 0.25f, 0.20f, 0.15f, 0.10f, 0.00f};
const Probs kQ = {0.00f, 0.10f, 0.40f, 0.15f, 0.05f, 0.30f};

// A rule maps (u for the test, draft, generator) to the emitted token.
using Rule = std::function<int32_t(int32_t draft, std::mt19937_64& rng)>;

double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

int32_t draw(const std::vector<float>& w, std::mt19937_64& rng) {
  double total = 0.0;
  for (float x : w) total += x;
  const double r = uniform(rng) * total;
  double cum = 0.0;
  int32_t last = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0.0f) continue;
    last = static_cast<int32_t>(i);
    cum += w[i];
    if (r < cum) break;
  }
  return last;
}

// Pearson chi-square of what `rule` emits over `trials` drafts drawn from
// kQ, against kP (cells with p = 0 must stay empty: any count there is
// returned as infinity).
double chi_square_against_p(const Rule& rule, int trials, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int> counts(kP.size(), 0);
  for (int i = 0; i < trials; ++i) ++counts[static_cast<size_t>(rule(draw(kQ, rng), rng))];
  double chi2 = 0.0;
  for (size_t i = 0; i < kP.size(); ++i) {
    const double e = kP[i] * trials;
    if (e == 0.0) {
      if (counts[i] > 0) return std::numeric_limits<double>::infinity();
      continue;
    }
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

// 4 degrees of freedom (5 cells with p > 0): P(chi2 > 25) ~ 5e-5. Seeds are
// fixed, so the outcome is the same on every run.
constexpr double kThreshold = 25.0;
constexpr int kTrials = 40000;

TEST(RejectionRule, EmittedTokensFollowTheTarget) {
  std::vector<float> residual;
  const Rule rule = [&](int32_t d, std::mt19937_64& rng) {
    const DraftVerdict v = judge_draft(kP, kQ, d, uniform(rng), residual);
    return v.accepted ? d : draw(*v.residual, rng);
  };
  EXPECT_LT(chi_square_against_p(rule, kTrials, 1), kThreshold);
  EXPECT_LT(chi_square_against_p(rule, kTrials, 2), kThreshold);
}

// The same statistic on deliberately wrong rules: the test above would catch
// each of them.
TEST(RejectionRule, TheChiSquareCatchesWrongRules) {
  const Rule keep_every_draft = [](int32_t d, std::mt19937_64&) { return d; };
  EXPECT_GT(chi_square_against_p(keep_every_draft, kTrials, 1), kThreshold);

  std::vector<float> residual;
  const Rule resample_from_p = [&](int32_t d, std::mt19937_64& rng) {
    const DraftVerdict v = judge_draft(kP, kQ, d, uniform(rng), residual);
    return v.accepted ? d : draw(kP, rng);  // wrong: p, not max(0, p - q)
  };
  EXPECT_GT(chi_square_against_p(resample_from_p, kTrials, 1), kThreshold);

  const Rule inverted_ratio = [&](int32_t d, std::mt19937_64& rng) {
    // wrong: keeps d with probability min(1, q/p)
    const double pd = kP[static_cast<size_t>(d)], qd = kQ[static_cast<size_t>(d)];
    if (pd > 0.0 && uniform(rng) * pd < qd) return d;
    std::vector<float> rest(kP.size());
    for (size_t i = 0; i < rest.size(); ++i) rest[i] = std::max(0.0f, kP[i] - kQ[i]);
    return draw(rest, rng);
  };
  EXPECT_GT(chi_square_against_p(inverted_ratio, kTrials, 1), kThreshold);
}

TEST(RejectionRule, AcceptsWheneverTheTargetLikesTheDraftAtLeastAsMuch) {
  std::vector<float> residual;
  // p(2) = 0.2 < q(2) = 0.4: kept for u < 0.5 only.
  EXPECT_TRUE(judge_draft(kP, kQ, 2, 0.49, residual).accepted);
  EXPECT_FALSE(judge_draft(kP, kQ, 2, 0.51, residual).accepted);
  // p(1) = 0.25 >= q(1) = 0.10: always kept.
  EXPECT_TRUE(judge_draft(kP, kQ, 1, 0.999, residual).accepted);
  // p(5) = 0: never kept; the residual is max(0, p - q).
  const DraftVerdict v = judge_draft(kP, kQ, 5, 0.0, residual);
  ASSERT_FALSE(v.accepted);
  const Probs expected = {0.30f, 0.15f, 0.0f, 0.0f, 0.05f, 0.0f};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR((*v.residual)[i], expected[i], 1e-6f) << i;
}

// The rule keeps sum_x min(p(x), q(x)) of the drafts (0.5 here). Sampling
// from p and keeping the draft when they agree is exact too, for any q, but
// keeps only sum_x p(x) q(x) (0.1325): the reason sampled drafts use the rule.
TEST(RejectionRule, KeepsTheOverlapOfTheTwoDistributions) {
  std::mt19937_64 rng(3);
  std::vector<float> residual;
  int kept = 0;
  for (int i = 0; i < kTrials; ++i) kept += judge_draft(kP, kQ, draw(kQ, rng), uniform(rng), residual).accepted;
  EXPECT_NEAR(kept / static_cast<double>(kTrials), 0.5, 0.01);
}

TEST(RejectionRule, EqualDistributionsAcceptEverything) {
  std::vector<float> residual;
  for (int32_t d = 1; d < 5; ++d) EXPECT_TRUE(judge_draft(kP, kP, d, 0.9999, residual).accepted);
}

}  // namespace
}  // namespace tokenmill::spec
