#include "cli/engine_flags.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "cli/rope_flags.h"
#include "engine/test_util.h"
#include "model/synth.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

// Parses `args` (without the program name) into a fresh command carrying
// the engine flags of `set`.
EngineFlags parse(std::vector<std::string> args, EngineFlagSet set) {
  CLI::App app("test");
  EngineFlags flags;
  add_engine_flags(app, flags, set);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last-first
  app.parse(args);
  return flags;
}

// The tiny synthetic llama written as Q8_0 (what the W8A8 runtime runs),
// once per test binary, removed at exit. (The string is never destroyed,
// so the exit handler can still read it.)
const std::string& q8_model_path() {
  static const std::string* path = [] {
    auto* p = new std::string(
        (std::filesystem::temp_directory_path() / ("tokenmill_cli_test_q8_" + std::to_string(::getpid()) + ".gguf"))
            .string());
    model::SynthOptions o;
    o.arch = model::SynthArch::kLlama;
    o.preset = "tiny";
    o.format = *model::parse_weight_format("Q8_0");
    o.seed = 7;
    o.num_threads = 1;
    model::write_synth_model(o, *p);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove(q8_model_path(), ec);
    });
    return p;
  }();
  return *path;
}

TEST(EngineFlagsTest, KvDtypeAcceptsEveryTypeAndNamesTheChoices) {
  EXPECT_EQ(parse_kv_dtype("f32"), kv::KvDtype::F32);
  EXPECT_EQ(parse_kv_dtype("f16"), kv::KvDtype::F16);
  EXPECT_EQ(parse_kv_dtype("q8_0"), kv::KvDtype::Q8_0);
  EXPECT_EQ(parse_kv_dtype("fp8_e4m3"), kv::KvDtype::FP8_E4M3);
  EXPECT_EQ(parse_kv_dtype("q4_0"), kv::KvDtype::Q4_0);
  EXPECT_EQ(parse_kv_dtype("q4_0_kc"), kv::KvDtype::Q4_0_KC);
  try {
    parse_kv_dtype("int4");
    FAIL() << "int4 accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--kv-dtype 'int4' is not one of: f32|f16|q8_0|fp8_e4m3|q4_0|q4_0_kc");
  }
}

TEST(EngineFlagsTest, FlagsReachTheEngineConfig) {
  const EngineFlags f =
      parse({"--kv-dtype", "q8_0", "--runtime", "w8a8", "--max-waiting", "3", "--max-seqs", "4", "--block-size", "8",
             "--kv-memory", "1M", "--no-prefix-cache", "--prefix-isolation", "tenant", "-t", "2"},
            EngineFlagSet::kServe);
  const engine::EngineConfig c = engine_config("m.gguf", f);
  EXPECT_EQ(c.model_path, "m.gguf");
  EXPECT_EQ(c.kv_dtype, kv::KvDtype::Q8_0);
  EXPECT_EQ(c.max_waiting, 3);
  EXPECT_EQ(c.max_seqs, 4);
  EXPECT_EQ(c.block_size, 8);
  EXPECT_EQ(c.kv_memory_bytes, 1 << 20);
  EXPECT_FALSE(c.prefix_cache);
  EXPECT_EQ(c.prefix_isolation, engine::PrefixIsolation::kTenant);
  EXPECT_EQ(c.num_threads, 2);
  EXPECT_TRUE(static_cast<bool>(c.matmul_hook_factory));
  // Defaults: F16 KV, the file's runtime.
  const EngineFlags d = parse({}, EngineFlagSet::kBench);
  EXPECT_EQ(engine_config("m.gguf", d).kv_dtype, kv::KvDtype::F16);
  EXPECT_EQ(d.runtime, "auto");
  // The admission limits belong to `serve` only.
  EXPECT_THROW(parse({"--max-waiting", "3"}, EngineFlagSet::kBench), CLI::ParseError);
  // The sliding-window pool: on by default, off with --no-window-pool (both sets).
  EXPECT_TRUE(engine_config("m.gguf", d).kv_window_pool);
  for (EngineFlagSet set : {EngineFlagSet::kServe, EngineFlagSet::kBench}) {
    EXPECT_FALSE(engine_config("m.gguf", parse({"--no-window-pool"}, set)).kv_window_pool);
  }
}

// The long-context policy: --kv-policy streaming with its sinks, window and
// positions; full by default; the older --kv-policy preempt|queue|reject
// still names what happens when the KV cache runs out (--kv-exhausted).
TEST(EngineFlagsTest, KvPolicyFlags) {
  for (EngineFlagSet set : {EngineFlagSet::kServe, EngineFlagSet::kBench}) {
    const engine::EngineConfig c =
        engine_config("m.gguf", parse({"--kv-policy", "streaming", "--kv-sinks", "8", "--kv-window", "512",
                                       "--kv-positions", "rerotate", "--kv-exhausted", "queue"},
                                      set));
    EXPECT_EQ(c.kv_policy.kind, kv::KvPolicyKind::kStreaming);
    EXPECT_EQ(c.kv_policy.sinks, 8);
    EXPECT_EQ(c.kv_policy.window, 512);
    EXPECT_EQ(c.kv_policy.positions, kv::KvPositions::kRerotate);
    EXPECT_EQ(c.kv_exhausted, sched::KvExhaustedPolicy::kQueue);
  }
  const engine::EngineConfig d = engine_config("m.gguf", parse({}, EngineFlagSet::kServe));
  EXPECT_FALSE(d.kv_policy.evicts());
  EXPECT_EQ(d.kv_exhausted, sched::KvExhaustedPolicy::kPreempt);
  const engine::EngineConfig old = engine_config("m.gguf", parse({"--kv-policy", "reject"}, EngineFlagSet::kServe));
  EXPECT_EQ(old.kv_exhausted, sched::KvExhaustedPolicy::kReject);
  EXPECT_FALSE(old.kv_policy.evicts());
  const auto error = [](std::vector<std::string> args) {
    try {
      engine_config("m.gguf", parse(std::move(args), EngineFlagSet::kServe));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error({"--kv-policy", "lru"}),
            "--kv-policy 'lru' is not one of: full, streaming, h2o (or preempt, queue, reject: see --kv-exhausted)");
  const engine::EngineConfig h = engine_config(
      "m.gguf", parse({"--kv-policy", "h2o", "--kv-window", "256", "--kv-budget", "1024"}, EngineFlagSet::kServe));
  EXPECT_EQ(h.kv_policy.kind, kv::KvPolicyKind::kHeavyHitter);
  EXPECT_EQ(h.kv_policy.budget, 1024);
  EXPECT_EQ(h.kv_policy.window, 256);
  EXPECT_EQ(error({"--kv-policy", "h2o", "--kv-window", "512", "--kv-budget", "500"}),
            "--kv-budget (500) must hold at least the sinks and the window (4 + 512)");
  EXPECT_EQ(error({"--kv-policy", "streaming", "--kv-window", "0"}), "--kv-window must be at least 1 position (got 0)");
  EXPECT_EQ(error({"--kv-policy", "streaming", "--kv-sinks", "-1"}), "--kv-sinks must not be negative (got -1)");
  EXPECT_EQ(error({"--kv-policy", "streaming", "--kv-positions", "shift"}),
            "--kv-positions 'shift' is not one of: preserve, rerotate");
  EXPECT_EQ(error({"--kv-policy", "reject", "--kv-exhausted", "queue"}),
            "--kv-policy reject and --kv-exhausted queue disagree");
  EXPECT_EQ(error({"--kv-policy", "streaming", "--spec", "ngram"}),
            "--kv-policy streaming(sinks=4,window=1024,positions=preserve) does not combine with speculative "
            "decoding (--spec)");
}

TEST(EngineFlagsTest, BadValuesAreErrorsBeforeTheModelLoads) {
  EngineFlags f;
  f.kv_dtype = "f8";
  EXPECT_THROW(engine_config("absent.gguf", f), Error);
  f = EngineFlags{};
  f.runtime = "int4";
  try {
    engine_config("absent.gguf", f);
    FAIL() << "int4 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--runtime 'int4'"), std::string::npos) << e.what();
  }
}

TEST(EngineFlagsTest, RuntimeFollowsTheFlagAndTheFile) {
  const std::string f32 = engine::testing::tiny_model_path();
  EXPECT_EQ(load_runtime_model(f32, "auto")->runtime_name(), "dense");  // no tokenmill.weights.runtime key
  EXPECT_EQ(load_runtime_model(f32, "dense")->hook(), nullptr);
  try {
    load_runtime_model(f32, "w8a8");
    FAIL() << "W8A8 on an F32 file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs Q8_0 weight matrices"), std::string::npos) << e.what();
  }
  const std::unique_ptr<RuntimeModel> w8 = load_runtime_model(q8_model_path(), "w8a8");
  ASSERT_NE(w8->hook(), nullptr);
  EXPECT_EQ(w8->runtime_name(), "w8a8");
  EXPECT_EQ(runtime_name(w8->hook()), "w8a8");
  EXPECT_EQ(runtime_name(nullptr), "dense");
  // The factory the engine calls builds the same hook from the flag.
  EngineFlags flags;
  flags.runtime = "w8a8";
  const std::unique_ptr<model::Model> m = model::Model::load(q8_model_path());
  EXPECT_EQ(runtime_name(engine_config("x", flags).matmul_hook_factory(*m).get()), "w8a8");
  flags.runtime = "auto";
  EXPECT_EQ(engine_config("x", flags).matmul_hook_factory(*m), nullptr);
}

// W8A8 weights and q8_0 KV through the engine: the summary line names both
// and the bytes per token (2 layers x K and V x 34-byte rows).
TEST(EngineFlagsTest, EngineRunsTheRuntimeAndReportsTheKvLayout) {
  EngineFlags flags;
  flags.runtime = "w8a8";
  flags.kv_dtype = "q8_0";
  flags.kv_memory = "64K";
  flags.threads = 1;
  engine::Engine e(engine_config(q8_model_path(), flags));
  EXPECT_EQ(e.kv_bytes_per_token(), 2 * 2 * 34);
  const std::string line = kv_summary(e);
  EXPECT_EQ(line.rfind("KV q8_0: 136 bytes/token, ", 0), 0u) << line;
  EXPECT_NE(line.find("weights runtime w8a8"), std::string::npos) << line;
  const auto* hook = dynamic_cast<const quant::WeightRuntimeHook*>(e.matmul_hook());
  ASSERT_NE(hook, nullptr);
  const engine::GenerationResult r = e.submit(engine::testing::greedy_request({1, 5, 9}, 3)).wait();
  EXPECT_EQ(r.tokens.size(), 3u);
  e.stop();
  EXPECT_GT(hook->num_calls(), 0u);  // read after the engine thread has joined
}

// The flags reach the engine's config as llama.cpp spells them; the
// serving context (-c, --ctx-size or --max-model-len) is the override's ctx.
TEST(RopeFlags, ServeFlagsBecomeTheEnginesOverrides) {
  const EngineFlags f = parse({"--rope-scaling", "yarn", "--rope-scale", "4", "--yarn-orig-ctx", "4096",
                               "--rope-freq-base", "500000", "-c", "32768"},
                              EngineFlagSet::kServe);
  const engine::EngineConfig c = engine_config("m.gguf", f);
  EXPECT_EQ(c.rope.scaling, "yarn");
  EXPECT_EQ(c.rope.scale, 4.0);
  EXPECT_EQ(c.rope.yarn_orig_ctx, 4096);
  EXPECT_EQ(c.rope.freq_base, 500000.0);
  EXPECT_EQ(c.rope.ctx, 32768);
  EXPECT_EQ(c.max_model_len, 32768);
  EXPECT_EQ(parse({"--max-model-len", "100"}, EngineFlagSet::kServe).max_model_len, 100);
}

TEST(RopeFlags, UnsetFlagsOverrideNothing) {
  const engine::EngineConfig c = engine_config("m.gguf", parse({}, EngineFlagSet::kBench));
  EXPECT_TRUE(c.rope.empty());
  const model::RopeOverrides o = rope_overrides(RopeFlags{}, 0);
  EXPECT_TRUE(o.empty());
  EXPECT_EQ(rope_overrides(RopeFlags{}, 2048).ctx, 2048);
}

}  // namespace
}  // namespace tokenmill::cli
