// Flags shared by the commands that load a model to generate with it: the
// KV element type and the weight runtime (run, logits, bench model, serve,
// bench engine), and the serving engine's flags (serve, bench engine). One
// definition each, so help texts, defaults and errors cannot drift apart.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/parallel_launch.h"
#include "cli/rope_flags.h"
#include "engine/engine.h"
#include "engine/engine_config.h"
#include "kv/kv_dtype.h"
#include "kv/kv_policy.h"
#include "model/model.h"
#include "quant/weight_runtime.h"
#include "sched/tenant_limits.h"
#include "spec/spec_config.h"

namespace tokenmill::cli {

// Adds --kv-dtype (f32|f16|q8_0|fp8_e4m3) bound to `dtype`, whose current
// value is the default shown in the help.
void add_kv_dtype_option(CLI::App& cmd, std::string& dtype);
// Adds --runtime (auto|dense|w8a8|fp8_e4m3; auto = the file's
// tokenmill.weights.runtime key) bound to `runtime`.
void add_runtime_option(CLI::App& cmd, std::string& runtime);

// The --kv-dtype value; throws Error naming the choices for anything else.
kv::KvDtype parse_kv_dtype(const std::string& name);

// A model with its weight runtime installed (Model::set_matmul_hook). The
// hook is owned here and cleared from the model before it is destroyed, so
// the pair stays valid for every forward call made while this lives.
class RuntimeModel {
 public:
  RuntimeModel(std::unique_ptr<model::Model> model, std::unique_ptr<quant::WeightRuntimeHook> hook);
  ~RuntimeModel();
  RuntimeModel(const RuntimeModel&) = delete;
  RuntimeModel& operator=(const RuntimeModel&) = delete;

  model::Model& model() { return *model_; }
  const quant::WeightRuntimeHook* hook() const { return hook_.get(); }
  std::string runtime_name() const;  // "dense", "w8a8", "fp8_e4m3"

 private:
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<quant::WeightRuntimeHook> hook_;  // null: dense
};

// Loads `path` (with the RoPE/context overrides, whose warnings go to
// stderr) and builds the runtime `runtime` names (see add_runtime_option).
// Throws Error for a bad file, an unknown runtime or one the file cannot
// use (W8A8 without Q8_0 matrices, FP8 without FP8-grid BF16 ones). Cost:
// FP8 packs its matrices once (one pass).
std::unique_ptr<RuntimeModel> load_runtime_model(const std::string& path, const std::string& runtime,
                                                 const model::RopeOverrides& rope = {});

// The engine's factory for the --runtime value (see add_runtime_option).
// Throws Error for an unknown name at once; what the file cannot use fails
// when the engine loads it.
engine::MatmulHookFactory runtime_hook_factory(const std::string& runtime);

// "dense", or the runtime of a WeightRuntimeHook the engine holds.
std::string runtime_name(const model::MatmulHook* hook);

// The serving engine's flags, as `serve` and `bench engine` spell them.
// Speculative decoding: --spec none|ngram|self|draft, --spec-k,
// --spec-ngram-min/max, --spec-skip-layers, --draft-model, --spec-fixed-k.
struct SpecFlags {
  std::string method = "none";
  int32_t k = 4;
  int32_t ngram_min = 1;
  int32_t ngram_max = 3;
  std::string skip_layers = "0.5";
  std::string draft_model;
  bool fixed_k = false;
};
void add_spec_flags(CLI::App& cmd, SpecFlags& flags);
// Throws Error naming the bad flag.
spec::SpecConfig spec_config(const SpecFlags& flags);

struct EngineFlags {
  int threads = 0;
  std::string kv_memory;
  double kv_fraction = 0.5;
  int64_t block_size = 16;
  std::string kv_dtype = "f16";
  std::string runtime = "auto";
  int64_t max_batch_tokens = 512;
  int32_t max_seqs = 32;
  int64_t prefill_chunk = 256;
  int64_t max_model_len = 0;  // serve and run (-c)
  int64_t max_waiting = 0;    // serve only
  double slo_ttft_ms = 0;     // serve only: SLO-aware admission targets (0 = none)
  double slo_tpot_ms = 0;
  double slo_e2e_ms = 0;
  std::string kv_exhausted = "preempt";
  // Long-context KV policy (kv/kv_policy.h): full | streaming | h2o. The
  // older spelling --kv-policy preempt|queue|reject still sets kv_exhausted.
  std::string kv_policy = "full";
  int64_t kv_sinks = 4;
  int64_t kv_window = 1024;
  int64_t kv_budget = 2048;
  std::string kv_positions = "preserve";
  bool no_prefix_cache = false;
  bool no_window_pool = false;  // gemma3: one KV pool for every layer
  std::string isolation = "shared";
  double aging_s = 10.0;
  SpecFlags spec;
  RopeFlags rope;                          // --rope-scaling, --rope-scale, ... (rope_flags.h)
  ParallelFlags parallel;                  // serve only: --tp, --pp, --pp-microbatches (parallel_launch.h)
  std::vector<std::string> tenant_limits;  // serve only: --tenant-limit TENANT:KEY=N,...
};

// The long-context KV policy flags, bound to the caller's fields:
// --kv-policy full|streaming|h2o, --kv-sinks, --kv-window, --kv-budget,
// --kv-positions. One definition for every command that takes them (run,
// serve, bench engine through add_engine_flags; eval), so names, help and
// defaults cannot drift apart. `older_spelling`: --kv-policy also accepts
// preempt|queue|reject (the serving engine's older name of --kv-exhausted).
struct KvPolicyFlagRefs {
  std::string& policy;
  int64_t& sinks;
  int64_t& window;
  int64_t& budget;
  std::string& positions;
};
void add_kv_policy_flags(CLI::App& cmd, const KvPolicyFlagRefs& f, bool older_spelling);

// The --tenant-limit values: "TENANT:running=N,waiting=N,prefix_blocks=N"
// (any subset of the keys; 0 = no limit), "*:..." for every tenant not
// listed. Throws Error naming the bad value.
sched::TenantPolicy parse_tenant_limits(const std::vector<std::string>& specs);

// The long-context KV policy of --kv-policy/--kv-sinks/--kv-window/
// --kv-budget/--kv-positions. Throws Error naming the bad flag.
kv::KvPolicy kv_policy(const EngineFlags& flags);

enum class EngineFlagSet {
  kServe,  // every flag
  kBench,  // without the admission limits (--max-model-len, --max-waiting)
  // `run`: every flag but the serving ones (--max-waiting, --slo-*,
  // --tenant-limit, --tp/--pp); -c is its one request's context.
  kRun,
};
void add_engine_flags(CLI::App& cmd, EngineFlags& flags, EngineFlagSet set);

// The EngineConfig the flags describe, validated; its matmul_hook_factory
// builds the --runtime hook when the engine loads the model. Throws Error
// naming the first bad flag.
engine::EngineConfig engine_config(const std::string& model_path, const EngineFlags& flags);

// One line for the start-up log: "KV q8_0: 136 bytes/token, 512 blocks x
// 16 = 1114112 bytes (1.1 MiB); weights runtime w8a8". With a separate
// sliding-window pool the block count reads "512 + 96 window blocks" and the
// bytes are both pools'.
std::string kv_summary(const engine::Engine& engine);

}  // namespace tokenmill::cli
