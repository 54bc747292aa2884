// ModelRunner on a tiny synthetic llama: block copies land before the
// forward pass, and StepLogits hands back each batch entry's rows (none,
// last, all) equal to the same sequence run on its own.
#include "runner/model_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "kv/block_allocator.h"
#include "model/single_sequence.h"
#include "model/synth.h"

namespace tokenmill::runner {
namespace {

class ModelRunnerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string(
        (std::filesystem::temp_directory_path() / ("tm_runner_test_" + std::to_string(::getpid()) + ".gguf")).string());
    model::SynthOptions o;
    o.arch = model::SynthArch::kLlama;
    o.preset = "tiny";
    o.format = *model::parse_weight_format("F32");
    o.seed = 11;
    o.num_threads = 1;
    model::write_synth_model(o, *path_);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove(*path_);
    delete path_;
  }

  void SetUp() override { model_ = model::Model::load(*path_); }

  // Logits of `tokens` run alone, rows as `rows` says.
  std::vector<float> alone(std::span<const int32_t> tokens, model::LogitRows rows) {
    model::SingleSequence one(*model_, 64, kv::KvDtype::F32);
    std::vector<float> logits;
    one.forward(tokens, rows, logits, pool_);
    return logits;
  }

  static std::string* path_;
  std::unique_ptr<model::Model> model_;
  ThreadPool pool_{2};
};
std::string* ModelRunnerTest::path_ = nullptr;

std::unique_ptr<sched::Sequence> make_seq(uint64_t id, std::vector<int32_t> prompt, kv::BlockAllocator& alloc) {
  auto s = std::make_unique<sched::Sequence>();
  s->id = id;
  s->prompt = std::move(prompt);
  s->tables.emplace_back(alloc, 4);
  EXPECT_TRUE(s->tables[0].append_slots(s->num_tokens(), nullptr));
  return s;
}

// One pool of `blocks` blocks holding every layer.
std::vector<std::unique_ptr<kv::PagedKvStorage>> one_pool(const model::Model& m, int64_t blocks) {
  std::vector<std::unique_ptr<kv::PagedKvStorage>> pools;
  pools.push_back(std::make_unique<kv::PagedKvStorage>(m.kv_geometry(4, kv::KvDtype::F32), blocks));
  return pools;
}

TEST_F(ModelRunnerTest, RowsByEntryMatchEachSequenceRunAlone) {
  ModelRunner runner(*model_, one_pool(*model_, 16), pool_);
  kv::BlockAllocator alloc(16);
  auto a = make_seq(1, {5, 9, 13, 2, 7}, alloc);
  auto b = make_seq(2, {3, 3, 8}, alloc);
  auto c = make_seq(3, {11, 4, 6, 1, 2, 9}, alloc);
  sched::ScheduledBatch batch;
  batch.seqs = {{a.get(), 0, 5, true, false}, {b.get(), 0, 3, false, false}, {c.get(), 0, 6, true, false}};
  const std::vector<model::LogitRows> rows{model::LogitRows::kAll, model::LogitRows::kNone, model::LogitRows::kLast};
  const StepLogits logits = runner.run(batch, rows);

  ASSERT_EQ(logits.num_entries(), 3u);
  EXPECT_EQ(logits.num_rows(0), 5u);
  EXPECT_EQ(logits.num_rows(1), 0u);
  EXPECT_EQ(logits.num_rows(2), 1u);
  const size_t vocab = static_cast<size_t>(model_->config().n_vocab);
  const std::vector<float> ref_a = alone(a->prompt, model::LogitRows::kAll);
  for (size_t j = 0; j < 5; ++j) {
    const std::span<const float> row = logits.row(0, j);
    for (size_t v = 0; v < vocab; ++v) ASSERT_NEAR(row[v], ref_a[j * vocab + v], 1e-4f) << "row " << j;
  }
  const std::vector<float> ref_c = alone(c->prompt, model::LogitRows::kLast);
  const std::span<const float> last = logits.last_row(2);
  for (size_t v = 0; v < vocab; ++v) ASSERT_NEAR(last[v], ref_c[v], 1e-4f);
  EXPECT_EQ(logits.last_row(0).data(), logits.row(0, 4).data());
}

TEST_F(ModelRunnerTest, AppliesBlockCopiesBeforeTheForwardPass) {
  // A fork of `a` decodes into a private copy of a's partly filled last
  // block: without the copy its positions 4..5 would read garbage.
  ModelRunner runner(*model_, one_pool(*model_, 16), pool_);
  kv::BlockAllocator alloc(16);
  auto a = make_seq(1, {5, 9, 13, 2, 7, 1}, alloc);
  sched::ScheduledBatch prefill;
  prefill.seqs = {{a.get(), 0, 6, true, false}};
  const std::vector<model::LogitRows> last{model::LogitRows::kLast};
  runner.run(prefill, last);

  auto fork = std::make_unique<sched::Sequence>();
  static_cast<sched::SequenceData&>(*fork) = *a;
  fork->tables.push_back(a->table(0).fork());
  fork->output = {8};
  sched::ScheduledBatch decode;
  decode.copies.resize(1);
  ASSERT_TRUE(fork->tables[0].append_slots(1, &decode.copies[0]));
  ASSERT_EQ(decode.copies[0].size(), 1u);
  decode.seqs = {{fork.get(), 6, 1, true, true}};
  const StepLogits logits = runner.run(decode, last);

  const std::vector<int32_t> all{5, 9, 13, 2, 7, 1, 8};
  const std::vector<float> ref = alone(all, model::LogitRows::kLast);
  const std::span<const float> row = logits.last_row(0);
  for (size_t v = 0; v < row.size(); ++v) ASSERT_NEAR(row[v], ref[v], 1e-4f);
}

}  // namespace
}  // namespace tokenmill::runner
