// Evaluation maths by hand (log-sum-exp, NLL, KL, quantiles, buckets), the
// window plan, and evaluate() on a tiny synthetic model against a direct
// computation from Model::forward logits; KL of a model with itself is 0;
// saved base logits reproduce the live comparison exactly.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>

#include <filesystem>
#include <random>
#include <vector>

#include "eval/evaluator.h"
#include "eval/loaded_model.h"
#include "eval/logit_math.h"
#include "eval/position_buckets.h"
#include "eval/report.h"
#include "eval/tasks.h"
#include "eval/windows.h"
#include "model/single_sequence.h"
#include "model/synth.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace tokenmill::eval {
namespace {

namespace fs = std::filesystem;

TEST(LogitMath, HandValues) {
  const float l[3] = {0.0f, std::log(2.0f), std::log(5.0f)};  // p = 1/8, 2/8, 5/8
  EXPECT_NEAR(log_sum_exp(l, 3), std::log(8.0), 1e-7);
  EXPECT_NEAR(negative_log_likelihood(l, 3, 1), std::log(4.0), 1e-7);
  const float q[3] = {0.0f, 0.0f, 0.0f};  // uniform
  // KL(P || U) = sum p log(3 p)
  const double want = 0.125 * std::log(0.375) + 0.25 * std::log(0.75) + 0.625 * std::log(1.875);
  EXPECT_NEAR(kl_divergence(l, q, 3), want, 1e-7);
  EXPECT_EQ(kl_divergence(l, l, 3), 0.0);
  EXPECT_EQ(argmax(l, 3), 2);
  const float big[2] = {1000.0f, 999.0f};  // stable at large logits
  EXPECT_NEAR(negative_log_likelihood(big, 2, 0), std::log(1.0 + std::exp(-1.0)), 1e-6);
}

TEST(PositionBuckets, QuantileAndEdges) {
  std::vector<float> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(quantile(v, 0.5), 2.5);  // NumPy: np.quantile([1,2,3,4], .5)
  EXPECT_DOUBLE_EQ(quantile(v, 0.99), 3.97);
  PositionBuckets b(100);  // edges 0, 16, 64, 100
  b.add(0, std::log(2.0), std::log(2.0), 0.1, true);
  b.add(15, std::log(8.0), std::log(2.0), 0.3, false);
  b.add(70, std::log(4.0), std::log(4.0), 0.0, true);
  const std::vector<BucketSummary> s = b.buckets();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].first, 0);
  EXPECT_EQ(s[0].last, 15);
  EXPECT_NEAR(s[0].ppl, 4.0, 1e-9);  // exp((log 2 + log 8) / 2)
  EXPECT_NEAR(s[0].base_ppl, 2.0, 1e-9);
  EXPECT_NEAR(s[0].mean_kl, 0.2, 1e-7);
  EXPECT_DOUBLE_EQ(s[0].top1, 0.5);
  EXPECT_EQ(s[1].first, 64);
  EXPECT_EQ(s[1].last, 99);
  EXPECT_EQ(b.total().count, 3);
}

TEST(Windows, PlanCoversEveryTargetOnce) {
  // N = 10, ctx 4, stride 2: windows start at 1, 3, 5, 7.
  const std::vector<Window> w = plan_windows(10, 4, 2);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0].begin, 1);
  EXPECT_EQ(w[0].end, 5);
  EXPECT_EQ(w[0].first_scored, 1);
  EXPECT_EQ(w[1].begin, 3);
  EXPECT_EQ(w[1].first_scored, 5);
  EXPECT_EQ(w[1].first_scored_row(), 2);  // scored rows have ctx - stride = 2 tokens of history at least
  EXPECT_EQ(w[3].end, 10);
  for (int64_t n : {2, 3, 17, 100}) {
    for (int64_t ctx : {int64_t{2}, int64_t{5}, int64_t{16}}) {
      for (int64_t stride : {int64_t{1}, ctx / 2 + 1, ctx}) {
        std::vector<int> seen(static_cast<size_t>(n), 0);
        for (const Window& x : plan_windows(n, ctx, stride)) {
          EXPECT_LE(x.input_length(), ctx);
          for (int64_t j = x.first_scored; j < x.end; ++j) ++seen[static_cast<size_t>(j)];
        }
        for (int64_t j = 1; j < n; ++j) ASSERT_EQ(seen[static_cast<size_t>(j)], 1) << n << " " << ctx << " " << stride;
      }
    }
  }
  EXPECT_THROW(plan_windows(1, 4, 2), Error);
  EXPECT_THROW(plan_windows(10, 4, 5), Error);
}

class EvalOnModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tm_eval_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    model::SynthOptions o;
    o.preset = "tiny";
    o.seed = 5;
    o.num_threads = 1;
    path_ = (dir_ / "m.gguf").string();
    model::write_synth_model(o, path_);
    model_ = model::Model::load(path_);
    std::mt19937 rng(3);
    std::uniform_int_distribution<int32_t> id(3, 500);
    seqs_ = {{1}, {1}};
    for (int i = 0; i < 40; ++i) seqs_[0].push_back(id(rng));
    for (int i = 0; i < 9; ++i) seqs_[1].push_back(id(rng));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Sum of NLL over the scored targets, straight from Model::forward on each
  // window's input.
  double direct_nll(int64_t ctx, int64_t stride) {
    ThreadPool pool(1);
    double sum = 0;
    for (const auto& s : seqs_) {
      for (const Window& w : plan_windows(static_cast<int64_t>(s.size()), ctx, stride)) {
        std::vector<int32_t> in = {s[0]};
        in.insert(in.end(), s.begin() + w.begin, s.begin() + w.end - 1);
        model::SingleSequence seq(*model_, static_cast<int64_t>(in.size()), kv::KvDtype::F32);
        std::vector<float> logits;
        seq.forward(in, true, logits, pool);
        const int64_t v = model_->config().n_vocab;
        for (int64_t j = w.first_scored; j < w.end; ++j) {
          sum += negative_log_likelihood(logits.data() + (j - w.begin) * v, v, s[static_cast<size_t>(j)]);
        }
      }
    }
    return sum;
  }

  fs::path dir_;
  std::string path_;
  std::unique_ptr<model::Model> model_;
  Sequences seqs_;
};

TEST_F(EvalOnModel, PerplexityMatchesDirectComputation) {
  ThreadPool pool(2);
  EvalSpec spec;
  spec.ctx = 16;
  spec.stride = 5;
  spec.batch = 3;  // batches straddle the first scored row
  const EvalResult r = evaluate({model_.get(), nullptr, kv::KvDtype::F32, nullptr, {}}, nullptr, seqs_, spec, pool);
  EXPECT_EQ(r.num_scored, 40 + 9);
  EXPECT_NEAR(std::log(r.buckets.total().ppl) * r.num_scored, direct_nll(16, 5), 1e-3);
  EXPECT_FALSE(r.buckets.has_base());
  EXPECT_NE(format_result(r).find("perplexity"), std::string::npos);
}

TEST_F(EvalOnModel, KldAgainstItselfIsZeroAndSavedLogitsMatch) {
  ThreadPool pool(2);
  std::unique_ptr<model::Model> same = model::Model::load(path_);
  EvalSpec spec;
  spec.ctx = 16;
  const ModelUnderTest m{model_.get(), nullptr, kv::KvDtype::F32, nullptr, {}};
  const ModelUnderTest base{same.get(), nullptr, kv::KvDtype::F32, nullptr, {}};
  const std::string saved = (dir_ / "base.logits").string();
  const EvalResult r = evaluate(m, &base, seqs_, spec, pool, saved);
  EXPECT_EQ(r.buckets.total().mean_kl, 0.0);
  EXPECT_EQ(r.buckets.total().top1, 1.0);
  EXPECT_DOUBLE_EQ(r.buckets.total().ppl, r.buckets.total().base_ppl);
  // Against a quantized KV cache the model differs a little, and the saved
  // base logits give exactly the live numbers.
  const ModelUnderTest q8{model_.get(), nullptr, kv::KvDtype::Q8_0, nullptr, {}};
  const EvalResult live = evaluate(q8, &base, seqs_, spec, pool);
  const EvalResult from_file = evaluate_saved(q8, SavedLogits::open(saved), spec.batch, pool);
  EXPECT_GT(live.buckets.total().mean_kl, 0.0);
  EXPECT_LT(live.buckets.total().mean_kl, 0.01);
  EXPECT_EQ(from_file.num_scored, live.num_scored);
  EXPECT_DOUBLE_EQ(from_file.buckets.total().mean_kl, live.buckets.total().mean_kl);
  EXPECT_DOUBLE_EQ(from_file.buckets.total().p99_kl, live.buckets.total().p99_kl);
  const nlohmann::json j = result_json(live);
  EXPECT_EQ(j["tokens"], live.num_scored);
  EXPECT_TRUE(j.contains("p99_kld"));
  // Bad input: a token outside the vocabulary, a context beyond training.
  Sequences bad = {{1, 2, 100000}};
  EXPECT_THROW(evaluate(m, nullptr, bad, spec, pool), Error);
  spec.ctx = 100000;
  EXPECT_THROW(evaluate(m, nullptr, seqs_, spec, pool), Error);
}

// The fixed sets: expected answers recomputed from the prompts' last line.
TEST(Tasks, BuiltinSetIsFixedAndSelfConsistent) {
  const std::vector<TaskItem> items = builtin_task_set();
  ASSERT_EQ(items.size(), 38u);
  EXPECT_EQ(items[0].prompt, builtin_task_set()[0].prompt);  // deterministic
  int arithmetic = 0, json = 0, needle = 0;
  for (const TaskItem& it : items) {
    const std::string last = it.prompt.substr(it.prompt.rfind('\n') + 1);
    if (it.task == "arithmetic") {
      ++arithmetic;
      int a = 0, b = 0;
      char op = 0;
      ASSERT_EQ(std::sscanf(last.c_str(), "%d %c %d =", &a, &op, &b), 3) << last;
      const int c = op == '+' ? a + b : op == '-' ? a - b : a * b;
      EXPECT_EQ(it.expected, std::to_string(c)) << last;
    } else if (it.task == "json") {
      ++json;
      EXPECT_TRUE(nlohmann::json::accept(it.expected));
    } else {
      ++needle;
      EXPECT_NE(it.prompt.find("The secret code is " + it.expected + "."), std::string::npos);
    }
  }
  EXPECT_EQ(arithmetic, 24);
  EXPECT_EQ(json, 8);
  EXPECT_EQ(needle, 6);
}

TEST_F(EvalOnModel, TasksRunAndCountEverySlice) {
  ThreadPool pool(2);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(model_->file());
  std::vector<TaskItem> items = builtin_task_set();
  items.resize(3);
  items.push_back({"json", "record", "x", "{\"a\": 1}", TaskCheck::kJson, 3});
  const TaskResult r = run_tasks({model_.get(), nullptr, kv::KvDtype::F32, nullptr, {}}, tok, items, pool);
  ASSERT_EQ(r.answers.size(), 4u);
  int64_t total = 0;
  for (const SliceScore& s : r.slices) total += s.total;
  EXPECT_EQ(total, 3 + 2);  // json counts in "valid" and "exact"
  EXPECT_GT(r.generated_tokens, 0);
  EXPECT_LE(r.generated_tokens, 3 * 6 + 3);
}

TEST(TokenFile, OneSequencePerLine) {
  const fs::path p = fs::temp_directory_path() / "tm_eval_tokens.txt";
  {
    std::FILE* f = std::fopen(p.c_str(), "w");
    std::fputs("1, 2,3\n\n1 7 8\r\n", f);
    std::fclose(f);
  }
  EXPECT_EQ(parse_token_file(p.string()), (Sequences{{1, 2, 3}, {1, 7, 8}}));
  {
    std::FILE* f = std::fopen(p.c_str(), "w");
    std::fputs("1,x\n", f);
    std::fclose(f);
  }
  EXPECT_THROW(parse_token_file(p.string()), Error);
  fs::remove(p);
}

}  // namespace
}  // namespace tokenmill::eval
