#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <vector>

#include "util/error.h"

namespace tokenmill::sample {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// A fixed pseudo-random row (an LCG, independent of the sampler's RNG).
std::vector<float> pseudo_random_logits(size_t n, uint32_t seed) {
  std::vector<float> out(n);
  uint32_t s = seed;
  for (float& v : out) {
    s = s * 1664525u + 1013904223u;
    v = static_cast<float>(s >> 8) / static_cast<float>(1u << 24) * 10.0f - 5.0f;
  }
  return out;
}

std::vector<float> log_of(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

std::vector<int> histogram(Sampler& s, const std::vector<float>& logits, int draws) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++counts[static_cast<size_t>(s.sample(logits, {}))];
  return counts;
}

SamplingParams with_temperature(float t, uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = t;
  p.seed = seed;
  return p;
}

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  Sampler s(with_temperature(0.0f), 6);
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f, std::nanf(""), 1.9f};
  EXPECT_EQ(s.sample(logits, {}), 1);
  EXPECT_EQ(s.last_probability(), 1.0f);
  const std::vector<float> all_neg = {-5.0f, -3.0f, -4.0f};
  Sampler s3(with_temperature(0.0f), 3);
  EXPECT_EQ(s3.sample(all_neg, {}), 1);
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDiffers) {
  const auto logits = pseudo_random_logits(50, 7);
  auto run = [&](uint64_t seed) {
    SamplingParams p = with_temperature(1.5f, seed);
    p.top_k = 30;
    p.top_p = 0.97f;
    Sampler s(p, 50);
    std::vector<int32_t> out;
    for (int i = 0; i < 1000; ++i) out.push_back(s.sample(logits, out));
    return out;
  };
  const auto a = run(42);
  EXPECT_EQ(a, run(42));
  const auto b = run(43);
  EXPECT_NE(a, b);
  // Not a degenerate sequence: several distinct tokens were drawn.
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 5u);
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplingParams p = with_temperature(1.0f, 3);
  p.top_k = 1;
  Sampler s(p, 1000);
  for (uint32_t row = 0; row < 20; ++row) {
    auto logits = pseudo_random_logits(1000, row);
    const auto argmax = std::max_element(logits.begin(), logits.end()) - logits.begin();
    EXPECT_EQ(s.sample(logits, {}), argmax);
    EXPECT_FLOAT_EQ(s.last_probability(), 1.0f);
  }
}

std::vector<int32_t> ids_best_first(const std::vector<float>& logits) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  return order;
}

std::vector<int32_t> filtered_ids(const Sampler& s, const std::vector<float>& logits) {
  SamplerScratch scratch;
  s.filter(logits, {}, scratch);
  std::vector<int32_t> ids;
  for (const Candidate& c : scratch.candidates) ids.push_back(c.id);
  return ids;
}

TEST(Sampler, TopKKeepsExactlyTheKBestOnLargeVocab) {
  constexpr size_t kVocab = 262144;
  auto logits = pseudo_random_logits(kVocab, 11);
  logits[1000] = logits[2000] = 9.0f;  // a tie inside the kept set, broken by id
  const auto order = ids_best_first(logits);
  SamplingParams p = with_temperature(1.0f, 5);
  p.top_k = 40;
  Sampler s(p, kVocab);
  EXPECT_EQ(filtered_ids(s, logits), std::vector<int32_t>(order.begin(), order.begin() + 40));

  p.temperature = kMaxTemperature;  // near-uniform over the kept set
  p.top_k = 8;
  Sampler hot(p, kVocab);
  std::set<int32_t> seen;
  for (int i = 0; i < 200; ++i) seen.insert(hot.sample(logits, {}));
  EXPECT_EQ(seen, std::set<int32_t>(order.begin(), order.begin() + 8));
}

TEST(Sampler, TopPKeepsSmallestSetReachingMass) {
  // Sorted: 0.4 (id 1), 0.25 (id 2), 0.2 (id 3), 0.1 (id 4), 0.05 (id 0).
  const auto logits = log_of({0.05, 0.4, 0.25, 0.2, 0.1});
  SamplingParams p = with_temperature(1.0f, 9);
  p.top_p = 0.6f;  // 0.4 + 0.25 = 0.65 >= 0.6 -> {1, 2}
  Sampler s(p, 5);
  auto h = histogram(s, logits, 4000);
  EXPECT_EQ(h[0] + h[3] + h[4], 0);
  // Renormalised: id 1 has 0.4 / 0.65 = 0.615; 4000 draws give sd ~ 0.0077.
  EXPECT_NEAR(h[1] / 4000.0, 0.4 / 0.65, 0.04);

  p.top_p = 0.9f;  // 0.85 < 0.9, + 0.1 = 0.95 -> {1, 2, 3, 4}
  Sampler s2(p, 5);
  h = histogram(s2, logits, 4000);
  EXPECT_EQ(h[0], 0);
  EXPECT_GT(h[4], 0);
}

// Exercises the geometric growth of the sorted prefix (64 -> 512 -> 4096).
TEST(Sampler, TopPOnLargeVocabMatchesFullSortReference) {
  constexpr size_t kVocab = 20000;
  auto logits = pseudo_random_logits(kVocab, 21);
  for (float& v : logits) v *= 0.3f;  // flatter, so the nucleus holds hundreds of tokens
  const auto order = ids_best_first(logits);
  for (float top_p : {0.001f, 0.05f, 0.5f, 0.99f}) {
    const double lmax = logits[order[0]];
    double total = 0.0;
    for (float v : logits) total += std::exp(v - lmax);
    size_t keep = 0;
    for (double cum = 0.0; cum < top_p * total; ++keep) cum += std::exp(logits[order[keep]] - lmax);

    SamplingParams p = with_temperature(1.0f);
    p.top_p = top_p;
    const auto got = filtered_ids(Sampler(p, kVocab), logits);
    // float exps in the sampler vs double here may move the cut by one token
    // when the mass lands within rounding of top_p; nowhere near for these rows.
    EXPECT_EQ(got, std::vector<int32_t>(order.begin(), order.begin() + keep)) << "top_p " << top_p;
  }
}

TEST(Sampler, TopKThenTopPThenMinPCompose) {
  // Probabilities 0.3, 0.25, 0.2, 0.15, 0.1 for ids 4, 3, 2, 1, 0.
  const auto logits = log_of({0.1, 0.15, 0.2, 0.25, 0.3});
  SamplingParams p = with_temperature(1.0f);
  p.top_k = 4;     // drops id 0; renormalised over 0.9: 0.333, 0.278, 0.222, 0.167
  p.top_p = 0.7f;  // 0.333 + 0.278 = 0.611 < 0.7, + 0.222 = 0.833 -> ids 4, 3, 2
  EXPECT_EQ(filtered_ids(Sampler(p, 5), logits), (std::vector<int32_t>{4, 3, 2}));
  p.min_p = 0.7f;  // p >= 0.21 -> ids 4, 3 (id 2 has 0.2 / 0.3 = 0.667 of the best)
  EXPECT_EQ(filtered_ids(Sampler(p, 5), logits), (std::vector<int32_t>{4, 3}));
  p.top_p = 1.0f;
  p.top_k = 0;
  p.min_p = 0.45f;  // alone: p >= 0.135 -> ids 1..4, in id order (no sort needed)
  EXPECT_EQ(filtered_ids(Sampler(p, 5), logits), (std::vector<int32_t>{1, 2, 3, 4}));
}

// Locally typical sampling computed directly from its definition: the
// tokens whose surprise -log p is nearest the entropy, nearest first, until
// their probability reaches typical_p.
std::set<int32_t> typical_reference(const std::vector<float>& logits, double typical_p) {
  double z = 0.0;
  for (float l : logits) z += std::exp(static_cast<double>(l));
  std::vector<double> p;
  for (float l : logits) p.push_back(std::exp(static_cast<double>(l)) / z);
  double h = 0.0;
  for (double q : p) h -= q * std::log(q);
  std::vector<int32_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return std::fabs(-std::log(p[a]) - h) < std::fabs(-std::log(p[b]) - h);
  });
  std::set<int32_t> kept;
  double mass = 0.0;
  for (int32_t id : order) {
    kept.insert(id);
    mass += p[static_cast<size_t>(id)];
    if (mass >= typical_p) break;
  }
  return kept;
}

TEST(Sampler, TypicalPMatchesTheDirectComputation) {
  for (uint32_t seed : {3u, 17u, 29u}) {
    const std::vector<float> logits = pseudo_random_logits(64, seed);
    for (float typical : {0.2f, 0.5f, 0.9f, 0.99f}) {
      SamplingParams p = with_temperature(1.0f);
      p.typical_p = typical;
      const std::vector<int32_t> got = filtered_ids(Sampler(p, 64), logits);
      EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()), typical_reference(logits, typical))
          << "seed " << seed << " typical_p " << typical;
      EXPECT_TRUE(std::is_sorted(got.begin(), got.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; }));
    }
  }
}

TEST(Sampler, TypicalPCanDropTheMostLikelyToken) {
  // The best token (p 0.19) is more likely than typical: its surprise
  // (1.65 nats) is far below the entropy (3.3), which the flat tail's
  // tokens (3.6 each) lie near, so a small typical_p keeps only tail tokens.
  std::vector<float> logits(32, 0.0f);
  logits[0] = 2.0f;
  SamplingParams p = with_temperature(1.0f);
  p.typical_p = 0.3f;
  const std::vector<int32_t> got = filtered_ids(Sampler(p, 32), logits);
  EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()), typical_reference(logits, 0.3));
  EXPECT_EQ(std::count(got.begin(), got.end(), 0), 0);
  SamplingParams bad = p;
  bad.typical_p = 0.0f;
  EXPECT_THROW(Sampler(bad, 32), Error);
}

TEST(Sampler, MinPKeepsTokensAboveFractionOfBest) {
  const auto logits = log_of({0.5, 0.3, 0.1, 0.06, 0.04});
  SamplingParams p = with_temperature(1.0f, 17);
  p.min_p = 0.15f;  // threshold 0.075 -> {0, 1, 2}
  Sampler s(p, 5);
  const auto h = histogram(s, logits, 3000);
  EXPECT_EQ(h[3] + h[4], 0);
  EXPECT_GT(h[2], 0);
  // Renormalised over {0, 1, 2}: id 2 has 0.1 / 0.9.
  EXPECT_NEAR(h[2] / 3000.0, 0.1 / 0.9, 0.03);
}

// Pearson chi-square of the counts against softmax(logits / T). With 4 degrees
// of freedom P(chi2 > 25) ~ 5e-5; the seed is fixed, so this is not flaky.
void check_temperature_distribution(float t, uint64_t seed) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f};
  std::vector<double> expected;
  double total = 0.0;
  for (float l : logits) total += std::exp(l / t);
  for (float l : logits) expected.push_back(std::exp(l / t) / total);
  Sampler s(with_temperature(t, seed), 5);
  constexpr int kDraws = 20000;
  std::vector<int> counts(5, 0);
  for (int i = 0; i < kDraws; ++i) {
    const int32_t id = s.sample(logits, {});
    ++counts[id];
    ASSERT_NEAR(s.last_probability(), expected[id], 1e-5);
  }
  double chi2 = 0.0;
  for (size_t i = 0; i < 5; ++i) {
    const double e = expected[i] * kDraws;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  EXPECT_LT(chi2, 25.0) << "temperature " << t;
}

TEST(Sampler, TemperatureMatchesSoftmaxDistribution) {
  check_temperature_distribution(1.0f, 100);
  check_temperature_distribution(0.5f, 101);
  check_temperature_distribution(2.0f, 102);
}

// distribution() is the law sample() draws from: it matches the softmax of
// the filtered candidates, and draws follow it (same chi-square as above).
TEST(Sampler, DistributionIsWhatSampleDrawsFrom) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, -3.0f};
  SamplingParams params = with_temperature(0.7f, 5);
  params.top_k = 4;  // drops ids 3 and 5
  Sampler s(params, 6);
  SamplerScratch scratch;
  std::vector<float> probs;
  s.distribution(logits, {}, scratch, probs);
  ASSERT_EQ(probs.size(), 6u);
  EXPECT_EQ(probs[3], 0.0f);
  EXPECT_EQ(probs[5], 0.0f);
  double total = 0.0;
  for (size_t i : {0u, 1u, 2u, 4u}) total += std::exp(logits[i] / 0.7);
  for (size_t i : {0u, 1u, 2u, 4u}) EXPECT_NEAR(probs[i], std::exp(logits[i] / 0.7) / total, 1e-6) << i;
  constexpr int kDraws = 20000;
  std::vector<int> counts(6, 0);
  for (int i = 0; i < kDraws; ++i) ++counts[static_cast<size_t>(s.sample(logits, {}))];
  double chi2 = 0.0;
  for (size_t i : {0u, 1u, 2u, 4u}) {
    const double e = probs[i] * kDraws;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  EXPECT_EQ(counts[3] + counts[5], 0);
  EXPECT_LT(chi2, 22.0);  // 3 degrees of freedom: P(chi2 > 22) ~ 6e-5
}

TEST(Sampler, GreedyDistributionIsAPointMassOnTheArgmax) {
  Sampler s(with_temperature(0.0f), 4);
  SamplerScratch scratch;
  std::vector<float> probs;
  s.distribution(std::vector<float>{0.1f, 3.0f, 3.0f, -1.0f}, {}, scratch, probs);
  EXPECT_EQ(probs, (std::vector<float>{0.0f, 1.0f, 0.0f, 0.0f}));
}

TEST(Sampler, DrawWeightedFollowsTheWeightsAndSkipsZeros) {
  Sampler s(with_temperature(1.0f, 9), 4);
  const std::vector<float> weights = {0.0f, 3.0f, 1.0f, 0.0f};  // unnormalised
  std::vector<int> counts(4, 0);
  for (int i = 0; i < 8000; ++i) ++counts[static_cast<size_t>(s.draw_weighted(weights))];
  EXPECT_EQ(counts[0] + counts[3], 0);
  EXPECT_NEAR(counts[1] / 8000.0, 0.75, 0.02);
  const int32_t id = s.draw_weighted(weights);
  EXPECT_FLOAT_EQ(s.last_probability(), weights[static_cast<size_t>(id)] / 4.0f);
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  const std::vector<float> logits = {0.0f, 1.0f};
  Sampler cold(with_temperature(0.25f, 1), 2), hot(with_temperature(4.0f, 1), 2);
  // p(1) = 1 / (1 + e^-4) = 0.982 cold, 1 / (1 + e^-0.25) = 0.562 hot.
  EXPECT_NEAR(histogram(cold, logits, 5000)[1] / 5000.0, 0.982, 0.01);
  EXPECT_NEAR(histogram(hot, logits, 5000)[1] / 5000.0, 0.562, 0.03);
}

TEST(ApplyBiasAndPenalties, MatchesFormulas) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.logit_bias = {{4, 1.5f}, {0, -1.0f}};
  p.penalty_last_n = -1;
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f, 7.0f};
  const std::vector<int32_t> history = {0, 1, 0, 3, 0, 4};
  std::vector<int32_t> window;
  apply_bias_and_penalties(p, logits, history, window);
  // id 0: 2 - 1 (bias) = 1 > 0 -> 1 / 2 = 0.5, count 3: 0.5 - 1.5 - 0.25 = -1.25
  // id 1: -1 -> -2, count 1: -2 - 0.5 - 0.25 = -2.75
  // id 2: untouched 0.5
  // id 3: 3 / 2 = 1.5, count 1: 1.5 - 0.75 = 0.75
  // id 4: 0 + 1.5 = 1.5 -> 0.75, count 1: 0.75 - 0.75 = 0
  // id 5: untouched 7
  const std::vector<float> expected = {-1.25f, -2.75f, 0.5f, 0.75f, 0.0f, 7.0f};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_FLOAT_EQ(logits[i], expected[i]) << i;
}

TEST(ApplyBiasAndPenalties, WindowIsLastN) {
  SamplingParams p;
  p.frequency_penalty = 1.0f;
  p.penalty_last_n = 2;
  std::vector<float> logits = {0.0f, 0.0f, 0.0f};
  std::vector<int32_t> window;
  apply_bias_and_penalties(p, logits, std::vector<int32_t>{0, 0, 1, 2, 2}, window);
  EXPECT_EQ(logits, (std::vector<float>{0.0f, 0.0f, -2.0f}));
  p.penalty_last_n = 0;  // off
  logits = {0.0f, 0.0f, 0.0f};
  apply_bias_and_penalties(p, logits, std::vector<int32_t>{0, 1, 2}, window);
  EXPECT_EQ(logits, (std::vector<float>{0.0f, 0.0f, 0.0f}));
}

int32_t greedy_with(const SamplingParams& base, std::vector<float> logits, std::vector<int32_t> history) {
  SamplingParams p = base;
  p.temperature = 0.0f;
  Sampler s(p, static_cast<int32_t>(logits.size()));
  return s.sample(logits, history);
}

TEST(Sampler, PenaltiesFlipGreedyChoice) {
  SamplingParams rep;
  rep.repetition_penalty = 1.2f;
  EXPECT_EQ(greedy_with(rep, {1.0f, 0.9f}, {}), 0);
  EXPECT_EQ(greedy_with(rep, {1.0f, 0.9f}, {0}), 1);    // 1 / 1.2 = 0.833 < 0.9
  EXPECT_EQ(greedy_with(rep, {-1.0f, -1.1f}, {0}), 1);  // -1 * 1.2 = -1.2 < -1.1
  EXPECT_EQ(greedy_with(rep, {1.0f, 0.9f, -5.0f}, {0, 2}), 1);
  rep.penalty_last_n = 1;
  EXPECT_EQ(greedy_with(rep, {1.0f, 0.9f, -5.0f}, {0, 2}), 0);  // id 0 left the window

  SamplingParams freq;
  freq.frequency_penalty = 0.15f;
  EXPECT_EQ(greedy_with(freq, {1.0f, 0.8f}, {0}), 0);     // 0.85 > 0.8
  EXPECT_EQ(greedy_with(freq, {1.0f, 0.8f}, {0, 0}), 1);  // 0.70 < 0.8

  SamplingParams pres;
  pres.presence_penalty = 0.3f;
  EXPECT_EQ(greedy_with(pres, {1.0f, 0.75f}, {0}), 1);           // 0.7 < 0.75
  EXPECT_EQ(greedy_with(pres, {1.0f, 0.65f}, {0, 0, 0, 0}), 0);  // not per count: 0.7 > 0.65
}

TEST(Sampler, LogitBiasMinusInfBansToken) {
  const std::vector<float> logits = {0.0f, 5.0f, 1.0f, 0.5f};
  SamplingParams p = with_temperature(0.0f);
  p.logit_bias = {{1, -kInf}};
  EXPECT_EQ(Sampler(p, 4).sample(logits, {}), 2);
  p.temperature = 1.0f;
  Sampler s(p, 4);
  const auto h = histogram(s, logits, 2000);
  EXPECT_EQ(h[1], 0);
  EXPECT_GT(h[0], 0);

  p.logit_bias = {{0, -kInf}, {1, -kInf}, {2, -kInf}, {3, -kInf}};
  Sampler banned(p, 4);
  EXPECT_THROW(banned.sample(logits, {}), Error);
  p.temperature = 0.0f;
  Sampler banned_greedy(p, 4);
  EXPECT_THROW(banned_greedy.sample(logits, {}), Error);
}

TEST(Sampler, ConstructorValidates) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_THROW(Sampler(p, 10), Error);
  EXPECT_THROW(Sampler(SamplingParams{}, 0), Error);
}

TEST(Sampler, SharedScratchGivesSameTokens) {
  const auto logits = pseudo_random_logits(300, 5);
  SamplingParams p = with_temperature(0.8f, 77);
  p.top_p = 0.9f;
  p.repetition_penalty = 1.3f;
  Sampler own(p, 300), shared(p, 300);
  SamplerScratch scratch;
  std::vector<int32_t> history = {1, 2, 3};
  for (int i = 0; i < 200; ++i) {
    const int32_t a = own.sample(logits, history);
    ASSERT_EQ(a, shared.sample(logits, history, scratch));
    history.push_back(a);
  }
}

}  // namespace
}  // namespace tokenmill::sample
