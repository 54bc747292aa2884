#include "bench/plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>

#include "util/error.h"

namespace tokenmill::bench {
namespace {

// A counter that is not one token per word: words of 7+ letters count 2.
int64_t two_token_long_words(const std::string& text) {
  int64_t n = 0, len = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ' ') {
      if (len) n += len >= 7 ? 2 : 1;
      len = 0;
    } else {
      ++len;
    }
  }
  return n;
}

TrafficSpec spec_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return parse_traffic_spec("inference_benchmark: t\n" + yaml, "t.yaml", overrides);
}

TEST(PromptBuilder, ExactCountsWithANonTrivialCounter) {
  PromptBuilder b(two_token_long_words);
  for (int64_t n : {1, 2, 17, 64, 333, 1000}) {
    const BuiltPrompt p = b.build(n, 0, 0, 1000 + n);
    EXPECT_EQ(p.tokens, n);
    EXPECT_EQ(two_token_long_words(p.text), n) << p.text;
  }
  // A shared prefix: two prompts start with the same text of the asked length.
  const BuiltPrompt a = b.build(300, 120, 77, 1), c = b.build(250, 120, 77, 2);
  EXPECT_EQ(a.shared_tokens, 120);
  EXPECT_EQ(a.tokens, 300);
  EXPECT_EQ(c.tokens, 250);
  size_t common = 0;
  while (common < std::min(a.text.size(), c.text.size()) && a.text[common] == c.text[common]) ++common;
  const std::string prefix = a.text.substr(0, common);
  EXPECT_GE(two_token_long_words(prefix), 120);
  EXPECT_LE(two_token_long_words(prefix), 122);  // a shared leading word or two by chance
}

TEST(Plan, BucketProportionsFollowTheWeights) {
  const TrafficSpec s = spec_of(
      "traffic: {concurrency: [4], requests_per_cell: 4000, length_buckets: [[8, 16], [100, 120]],\n"
      "  length_bucket_weights: [1, 3], output_buckets: [[1, 4], [10, 12]], output_bucket_weights: [3, 1]}\n"
      "prompts: {token_counter: words}");
  const RunPlan plan = make_run_plan(s, count_words);
  ASSERT_EQ(plan.cells.size(), 1u);
  const auto& reqs = plan.cells[0].requests;
  ASSERT_EQ(reqs.size(), 4000u);
  int in1 = 0, out0 = 0;
  for (const PlannedRequest& r : reqs) {
    const LengthRange& ib = s.input_buckets[r.input_bucket];
    EXPECT_GE(r.input_tokens, ib.min);
    EXPECT_LE(r.input_tokens, ib.max);
    EXPECT_EQ(count_words(r.prompt), r.input_tokens);
    const LengthRange& ob = s.output_buckets[r.output_bucket];
    EXPECT_GE(r.max_tokens, ob.min);
    EXPECT_LE(r.max_tokens, ob.max);
    in1 += r.input_bucket == 1;
    out0 += r.output_bucket == 0;
  }
  // 4 standard deviations of a binomial(4000, 0.75): 4 * sqrt(4000 * .75 * .25) = 110.
  EXPECT_NEAR(in1, 3000, 110);
  EXPECT_NEAR(out0, 3000, 110);
}

TEST(Plan, SameSpecAndSeedGiveTheSameBytes) {
  const std::string yaml =
      "traffic: {concurrency: [1, 4], arrival: poisson_with_burst, rate: 3, requests_per_cell: 50,\n"
      "  length_buckets: [[4, 40], [41, 90]], cache_hit_rate: [0, 0.5], cancel_rate: 0.2}\n"
      "controls: {random_seed: 8842, warmup_requests: 5}";
  const std::string a = plan_to_jsonl(make_run_plan(spec_of(yaml), two_token_long_words));
  const std::string b = plan_to_jsonl(make_run_plan(spec_of(yaml), two_token_long_words));
  const std::string c =
      plan_to_jsonl(make_run_plan(spec_of(yaml, {"controls.random_seed=8843"}), two_token_long_words));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(std::count(a.begin(), a.end(), '\n'), 5 + 4 * 50);
}

TEST(Plan, CellsDifferAndSchedulesAscend) {
  const TrafficSpec s = spec_of(
      "traffic: {concurrency: [1, 2], rate: 10, requests_per_cell: 30}\n"
      "prompts: {token_counter: words}");
  const RunPlan plan = make_run_plan(s, count_words);
  ASSERT_EQ(plan.cells.size(), 2u);
  EXPECT_NE(plan.cells[0].requests[0].prompt, plan.cells[1].requests[0].prompt);  // no cross-cell cache hits
  for (const CellPlan& c : plan.cells) {
    for (size_t i = 1; i < c.requests.size(); ++i) EXPECT_GT(c.requests[i].scheduled_s, c.requests[i - 1].scheduled_s);
  }
  const RunPlan closed = make_run_plan(spec_of("traffic: {arrival: closed_loop, requests_per_cell: 3}\n"
                                               "prompts: {token_counter: words}"),
                                       count_words);
  for (const PlannedRequest& r : closed.cells[0].requests) EXPECT_LT(r.scheduled_s, 0);
}

TEST(Plan, CacheHitRateRealisedAsSharedPrefix) {
  // Proportional: every prompt's first round(h * n) tokens are shared.
  const RunPlan p = make_run_plan(spec_of("traffic: {cache_hit_rate: [0.5], requests_per_cell: 200, "
                                          "length_buckets: [[100, 100]]}\nprompts: {token_counter: words}"),
                                  count_words);
  for (const PlannedRequest& r : p.cells[0].requests) {
    EXPECT_EQ(r.shared_tokens, 50);
    EXPECT_EQ(r.prompt.substr(0, 40), p.cells[0].requests[0].prompt.substr(0, 40));
  }
  // Fixed: a 200-token prefix on a fraction h of the requests (the reference traffic).
  const RunPlan f = make_run_plan(spec_of("traffic: {cache_hit_rate: [0.9], shared_prefix_tokens: 200, "
                                          "requests_per_cell: 2000, length_buckets: [[210, 400]]}\n"
                                          "prompts: {token_counter: words}"),
                                  count_words);
  int with = 0;
  for (const PlannedRequest& r : f.cells[0].requests) {
    EXPECT_TRUE(r.shared_tokens == 0 || r.shared_tokens == 200);
    with += r.shared_tokens == 200;
  }
  EXPECT_NEAR(with, 1800, 4 * std::sqrt(2000 * 0.9 * 0.1));
}

TEST(Plan, CancelRateAndPoints) {
  const RunPlan p = make_run_plan(spec_of("traffic: {cancel_rate: 0.25, requests_per_cell: 4000, "
                                          "output_buckets: [[10, 20]]}\nprompts: {token_counter: words}"),
                                  count_words);
  int cancelled = 0;
  for (const PlannedRequest& r : p.cells[0].requests) {
    if (r.cancel_after == 0) continue;
    ++cancelled;
    EXPECT_GE(r.cancel_after, 1);
    EXPECT_LT(r.cancel_after, r.max_tokens);
  }
  EXPECT_NEAR(cancelled, 1000, 4 * std::sqrt(4000 * 0.25 * 0.75));
}

TEST(Plan, DatasetAndTraceFiles) {
  const std::string dir = ::testing::TempDir();
  const std::string data = dir + "/prompts.jsonl", trace = dir + "/trace.jsonl", bad = dir + "/bad.jsonl";
  std::ofstream(data) << "{\"prompt\": \"one two three\"}\n\n"
                         "{\"prompt\": \"a b c d e f g h i j\", \"output_tokens\": 7}\n";
  std::ofstream(trace) << "{\"timestamp\": 100.0, \"input_tokens\": 12, \"output_tokens\": 3}\n"
                          "{\"timestamp\": 100.5, \"prompt\": \"hello there\"}\n";
  std::ofstream(bad) << "{\"prompt\": 5}\n";
  const RunPlan d = make_run_plan(spec_of("traffic: {requests_per_cell: 40, length_buckets: [[1, 5], [6, 20]]}\n"
                                          "prompts: {source: jsonl, path: " +
                                          data + ", token_counter: words}"),
                                  count_words);
  for (const PlannedRequest& r : d.cells[0].requests) {
    EXPECT_EQ(r.input_tokens, count_words(r.prompt));
    if (r.input_tokens == 10) {
      EXPECT_EQ(r.max_tokens, 7);
    }
  }
  const RunPlan t = make_run_plan(spec_of("traffic: {arrival: replay}\n"
                                          "prompts: {source: trace, path: " +
                                          trace + ", token_counter: words}"),
                                  count_words);
  ASSERT_EQ(t.cells[0].requests.size(), 2u);
  EXPECT_DOUBLE_EQ(t.cells[0].requests[0].scheduled_s, 0.0);
  EXPECT_DOUBLE_EQ(t.cells[0].requests[1].scheduled_s, 0.5);
  EXPECT_EQ(t.cells[0].requests[0].input_tokens, 12);
  EXPECT_EQ(t.cells[0].requests[0].max_tokens, 3);
  EXPECT_EQ(t.cells[0].requests[1].prompt, "hello there");
  try {
    make_run_plan(spec_of("prompts: {source: jsonl, path: " + bad + ", token_counter: words}"), count_words);
    ADD_FAILURE() << "accepted a non-string prompt";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tokenmill::bench
