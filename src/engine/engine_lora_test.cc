// LoRA adapters in the serving engine: requests with different adapters
// (and none) batched together produce what each produces alone; prefix-cache
// blocks are shared by requests with the same adapter contents and never
// across adapters; the metrics count lookups per adapter.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine/test_util.h"
#include "model/lora_adapter.h"
#include "model/synth_lora.h"

namespace tokenmill::engine {
namespace {

using testing::greedy_request;
using testing::random_prompt;
using testing::tiny_config;
using Driver = testing::CoreDriver;

// Synthetic adapters for the tiny test model, written once per seed and
// removed at exit.
class AdapterFiles {
 public:
  ~AdapterFiles() {
    std::error_code ec;
    for (const auto& [seed, path] : paths_) std::filesystem::remove(path, ec);
  }
  const std::string& path(uint64_t seed) {
    std::string& p = paths_[seed];
    if (p.empty()) {
      model::SynthLoraOptions o;
      o.rank = 8;
      o.seed = seed;
      o.strength = 0.5f;
      p = (std::filesystem::temp_directory_path() /
           ("tokenmill_engine_lora_" + std::to_string(seed) + "_" + std::to_string(::getpid()) + ".gguf"))
              .string();
      model::build_synth_lora(gguf::GgufFile::open(testing::tiny_model_path()), o).write(p);
    }
    return p;
  }

 private:
  std::map<uint64_t, std::string> paths_;
};

const std::string& adapter_path(uint64_t seed) {
  static AdapterFiles files;
  return files.path(seed);
}

std::shared_ptr<const model::LoraAdapter> load(Driver& d, uint64_t seed, const std::string& name) {
  return model::LoraAdapter::load(adapter_path(seed), d.core().model(), name);
}

GenerateRequest with_adapter(GenerateRequest r, std::shared_ptr<const model::LoraAdapter> a) {
  r.adapter = std::move(a);
  return r;
}

TEST(EngineLora, MixedAdaptersInOneBatchMatchEachAlone) {
  Driver d(tiny_config());
  const std::shared_ptr<const model::LoraAdapter> adapters[] = {nullptr, load(d, 1, "a"), load(d, 2, "b"),
                                                                load(d, 3, "c")};
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 8; ++i)
    requests.push_back(with_adapter(greedy_request(random_prompt(40 + i % 4, 6 + i), 10), adapters[i % 4]));
  std::vector<std::vector<int32_t>> alone;
  for (const GenerateRequest& r : requests) {
    RequestHandle h = d.add(r);
    d.run_to_end();
    alone.push_back(h.wait().tokens);
  }
  // The same prompt under different adapters continues differently.
  EXPECT_NE(alone[0], alone[1]);
  EXPECT_NE(alone[1], alone[2]);
  std::vector<RequestHandle> handles;
  for (const GenerateRequest& r : requests) handles.push_back(d.add(r));
  d.run_to_end();
  for (size_t i = 0; i < handles.size(); ++i) EXPECT_EQ(handles[i].wait().tokens, alone[i]) << "request " << i;
}

TEST(EngineLora, PrefixBlocksAreSharedOnlyUnderTheSameAdapterContents) {
  Driver d(tiny_config());
  const auto a = load(d, 1, "a");
  const auto a_again = load(d, 1, "a-copy");  // same file contents under another name
  const auto b = load(d, 2, "b");
  const std::vector<int32_t> prompt = random_prompt(7, 50);  // 3 whole blocks of 16
  const auto cached = [&](std::shared_ptr<const model::LoraAdapter> adapter) {
    RequestHandle h = d.add(with_adapter(greedy_request(prompt, 2), std::move(adapter)));
    d.run_to_end();
    return h.wait().final.usage.cached_prompt_tokens;
  };
  EXPECT_EQ(cached(nullptr), 0);
  EXPECT_EQ(cached(a), 0);         // the base's blocks are not a's
  EXPECT_EQ(cached(a), 48);        // a's own blocks
  EXPECT_EQ(cached(a_again), 48);  // the same contents: the same namespace
  EXPECT_EQ(cached(b), 0);
  EXPECT_EQ(cached(nullptr), 48);

  const MetricsSnapshot m = d.metrics();
  std::map<std::string, const PrefixStats*> by;
  for (const PrefixStats& s : m.prefix_by_adapter) by[s.label] = &s;
  ASSERT_EQ(by.size(), 4u);
  EXPECT_EQ(by[""]->hit_tokens, 48u);
  EXPECT_EQ(by["a"]->hit_tokens, 48u);
  EXPECT_EQ(by["a-copy"]->hit_tokens, 48u);
  EXPECT_EQ(by["b"]->hit_tokens, 0u);
  // b's miss: the same tokens are cached, under other adapters.
  EXPECT_EQ(by["b"]->miss_tokens[static_cast<size_t>(kv::PrefixMissReason::kIsolated)], 48u);
}

TEST(EngineLora, AnAdapterOfAnotherModelIsRejected) {
  Driver d(tiny_config());
  Driver other(tiny_config());
  RequestHandle h = d.add(with_adapter(greedy_request(random_prompt(1, 5), 3), load(other, 1, "x")));
  d.run_to_end();
  const FinalEvent f = h.wait().final;
  EXPECT_EQ(f.reason, FinishReason::kRejected);
  EXPECT_EQ(f.reject, RejectReason::kInvalid);
  EXPECT_NE(f.error.find("another model"), std::string::npos) << f.error;
}

}  // namespace
}  // namespace tokenmill::engine
