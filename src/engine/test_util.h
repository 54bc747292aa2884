// Shared by the engine tests: a tiny synthetic llama (64-wide, 2 layers,
// 512-token SPM vocabulary, context 256) written once per test binary to a
// temporary file, and an independent greedy reference that runs one
// sequence through model::SingleSequence (no scheduler, no shared pool).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/engine_config.h"
#include "engine/engine_core.h"
#include "engine/request.h"
#include "model/model.h"
#include "model/single_sequence.h"
#include "model/synth.h"
#include "util/thread_pool.h"

namespace tokenmill::engine::testing {

// A tiny synthetic llama (F32, built-in 512-token vocabulary unless
// `vocab` says otherwise) written to a temporary file named after `tag`,
// removed at exit. (The strings are never destroyed, so the exit handler
// can still read them.)
inline std::string* write_test_model(const std::string& tag, uint64_t seed, int64_t n_layer, int64_t vocab = 0) {
  static std::vector<std::string>* written = [] {
    auto* paths = new std::vector<std::string>;
    std::atexit([] {
      std::error_code ec;
      for (const std::string& p : *written) std::filesystem::remove(p, ec);
    });
    return paths;
  }();
  const std::filesystem::path p = std::filesystem::temp_directory_path() /
                                  ("tokenmill_engine_test_" + tag + "_" + std::to_string(::getpid()) + ".gguf");
  model::SynthOptions o;
  o.arch = model::SynthArch::kLlama;
  o.preset = "tiny";
  o.format = *model::parse_weight_format("F32");
  o.seed = seed;
  o.num_threads = 1;
  o.overrides.n_layer = n_layer;
  if (vocab > 0) o.overrides.vocab = vocab;
  model::write_synth_model(o, p.string());
  written->push_back(p.string());
  return new std::string(p.string());
}

// How many rounds a randomized (property) test runs: `full`, or a fifth
// when TOKENMILL_TEST_QUICK=1 (scripts/test_all.sh sets it where every
// step costs 10-100x: under ASan and under emulation). The native unit
// stages run the full count.
inline int property_rounds(int full) {
  const char* quick = std::getenv("TOKENMILL_TEST_QUICK");
  return quick != nullptr && std::string(quick) == "1" ? std::max(full / 5, 1) : full;
}

// The engine tests' model (2 layers); written on first use.
inline const std::string& tiny_model_path() {
  static const std::string* path = write_test_model("tiny", 7, 2);
  return *path;
}

// A draft model for it: one layer, the same seed (so it shares the
// target's embeddings and first layer, and agrees with it part of the
// time), the same vocabulary.
inline const std::string& tiny_draft_model_path() {
  static const std::string* path = write_test_model("draft", 7, 1);
  return *path;
}

// A model whose vocabulary differs (300 tokens): it cannot draft for tiny.
inline const std::string& other_vocab_model_path() {
  static const std::string* path = write_test_model("other_vocab", 9, 1, 300);
  return *path;
}

// A small engine: 64 blocks of 16 positions, F16 KV, 2 threads.
inline EngineConfig tiny_config() {
  EngineConfig c;
  c.model_path = tiny_model_path();
  c.num_threads = 2;
  c.kv_num_blocks = 64;
  c.block_size = 16;
  c.max_seqs = 32;
  c.max_batch_tokens = 256;
  c.prefill_chunk = 32;
  c.priority_aging_s = 0;
  return c;
}

// A greedy request that never stops early (ignore_eos).
inline GenerateRequest greedy_request(std::vector<int32_t> prompt, int64_t max_tokens) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  r.sampling.ignore_eos = true;
  return r;
}

// `r` asking for n samples (the forks of one prompt).
inline GenerateRequest with_n(GenerateRequest r, int n) {
  r.n = n;
  return r;
}

// An EngineCore driven step by step on the test's thread (no engine
// thread), for exact checks of scheduling and bookkeeping.
class CoreDriver {
 public:
  explicit CoreDriver(const EngineConfig& config) : core_(config, metrics_) {}

  RequestHandle add(const GenerateRequest& r) { return add_samples(r).front(); }
  // One handle per sample (r.n of them).
  std::vector<RequestHandle> add_samples(const GenerateRequest& r) {
    std::vector<std::shared_ptr<RequestStream>> streams;
    std::vector<RequestHandle> handles;
    for (int k = 0; k < r.n; ++k) {
      streams.push_back(std::make_shared<RequestStream>(next_id_++));
      handles.emplace_back(streams.back());
    }
    metrics_.on_submit();
    core_.add(streams, r, SteadyClock::now());
    return handles;
  }
  void run_to_end() {
    while (core_.has_work()) core_.step();
  }
  EngineCore& core() { return core_; }
  MetricsSnapshot metrics() const { return metrics_.snapshot(); }

 private:
  Metrics metrics_;
  EngineCore core_;
  RequestId next_id_ = 1;
};

// `n` random ids in [3, 512) (no BOS/EOS/UNK), from a fixed seed.
inline std::vector<int32_t> random_prompt(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = static_cast<int32_t>(3 + rng() % 509);
  return ids;
}

// Greedy continuation computed without the engine (model::greedy_continuation
// on one thread).
inline std::vector<int32_t> reference_greedy(model::Model& m, const std::vector<int32_t>& prompt, int64_t n,
                                             kv::KvDtype dtype = kv::KvDtype::F16) {
  ThreadPool pool(1);
  return model::greedy_continuation(m, prompt, n, dtype, pool);
}

}  // namespace tokenmill::engine::testing
