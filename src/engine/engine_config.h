// How an Engine is built: the model, threads, the KV pool's size and layout,
// and the scheduler's knobs. Plain data with defaults for a CPU server.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "engine/slo_targets.h"
#include "kv/kv_dtype.h"
#include "kv/kv_policy.h"
#include "model/config.h"
#include "model/matmul_hook.h"
#include "model/parallel.h"
#include "model/rope_config.h"
#include "sched/scheduler.h"
#include "sched/tenant_limits.h"
#include "spec/spec_config.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill::model {
class Model;
}  // namespace tokenmill::model

namespace tokenmill::engine {

// Chooses an alternative weight runtime for the freshly loaded model (e.g.
// W8A8 or FP8, quant/weight_runtime.h). Called once, on the thread that
// constructs the engine, before the engine thread starts; returns null for
// the plain kernels. The engine owns the hook and installs it with
// Model::set_matmul_hook, so it lives as long as the model is used. May
// throw Error (a runtime the file cannot use), which fails the engine's
// construction.
using MatmulHookFactory = std::function<std::unique_ptr<model::MatmulHook>(const model::Model&)>;

// Per-tenant bounds on running, waiting and prefix-cache blocks
// (sched/tenant_limits.h; 0 = no limit).
using sched::TenantLimits;

enum class PrefixIsolation {
  kShared,  // every tenant shares one prefix-cache domain
  kTenant,  // a tenant only hits blocks its own requests computed
};

struct EngineConfig {
  std::string model_path;
  int num_threads = 0;  // 0: one per online CPU
  // --rope-scaling/--rope-scale/--rope-freq-base/--yarn-orig-ctx/--ctx:
  // applied to the model at load (model/rope_config.h); part of the
  // prefix-cache namespace through the model's config.
  model::RopeOverrides rope;

  // KV pool size, first match wins: kv_num_blocks (exact, for tests), then
  // kv_memory_bytes, then kv_memory_fraction of MemAvailable. The result is
  // capped at what max_seqs full-length sequences could ever use.
  int64_t kv_num_blocks = 0;
  int64_t kv_memory_bytes = 0;
  double kv_memory_fraction = 0.5;
  int64_t block_size = 16;  // positions per KV block
  kv::KvDtype kv_dtype = kv::KvDtype::F16;
  // Models with sliding-window and full-attention layers (gemma3): keep the
  // window layers' K/V in their own pool, sized by window_pool_blocks, so a
  // sequence holds only its last window of them (see resolve_kv_pools).
  // Off: one pool holds every layer for every position.
  bool kv_window_pool = true;
  // What a long sequence keeps in the cache (kv/kv_policy.h): full, or
  // attention sinks + a recent window (--kv-policy streaming). Part of the
  // prefix-cache namespace when it evicts.
  kv::KvPolicy kv_policy;
  MatmulHookFactory matmul_hook_factory;  // empty: the plain kernels
  // The model file's tokenizer when the caller has already built it (it
  // must come from model_path: `tokenmill run` tokenizes before it can size
  // the engine); null: the engine builds it from the file.
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;

  int64_t max_batch_tokens = 512;  // tokens per forward pass, all sequences together
  int32_t max_seqs = 32;           // sequences running at once
  int64_t prefill_chunk = 256;     // max prefill tokens per sequence per step; 0 = unchunked
  int64_t max_model_len = 0;       // prompt + max_tokens cap; 0 = the model's training context
  // Waiting requests beyond the free sequence slots (what cannot start
  // now; sched/scheduler.h POLICY): arrivals beyond are refused kQueueFull.
  // 0 = none.
  int64_t max_waiting = 0;
  sched::KvExhaustedPolicy kv_exhausted = sched::KvExhaustedPolicy::kPreempt;
  double priority_aging_s = 10.0;  // seconds per priority class of aging; 0 = off
  // SLO-aware admission (slo_admission.h): requests forecast to miss a
  // target are refused (kSloUnattainable). None set: admission as before.
  SloTargets slo;
  // With targets: run a few calibration steps when the engine starts, so
  // the gate forecasts from the first request (slo_calibration.h). Off
  // only for tests of the uncalibrated gate.
  bool slo_calibration = true;

  bool prefix_cache = true;
  PrefixIsolation prefix_isolation = PrefixIsolation::kShared;
  std::string adapter_id;  // part of the prefix-cache namespace; "" = base model

  // Per-tenant limits (GenerateRequest::tenant; "" is a tenant of its own):
  // a tenant's own entry, else default_tenant_limits, which applies to each
  // unlisted tenant separately.
  std::map<std::string, TenantLimits> tenant_limits;
  TenantLimits default_tenant_limits;

  // Speculative decoding: the proposer that drafts tokens for decoding
  // sequences and k, the most it drafts per step (GenerateRequest::spec_max_draft
  // narrows it per request). Greedy and seeded sampling give the same tokens
  // with it as without (engine_core.cc, verify).
  spec::SpecConfig spec;

  // Tensor/pipeline parallelism (model/parallel.h; dist/mpi_runtime.h over
  // MPI): this process is the root rank and the model is sharded as the
  // runtime says. Null: one process holds the whole model.
  std::shared_ptr<model::ParallelComm> parallel;

  // Throws Error naming the first bad field (model_path is checked on load).
  void validate() const;
};

// The block count of the KV pool for a model whose K/V take
// bytes_per_block per block (see the precedence in EngineConfig).
// mem_available: MemAvailable in bytes, used only for the fraction. Throws
// Error when the budget holds no block at all.
int64_t resolve_kv_blocks(const EngineConfig& config, const model::ModelConfig& model, int64_t bytes_per_block,
                          int64_t mem_available);

// The sliding-window pool's block count: every running sequence's window
// plus the block it is writing, plus room for one step's prefill chunks:
//   max_seqs * (ceil(window / block_size) + 2) + ceil(max_batch_tokens / block_size).
// (A sequence writing c tokens holds at most ceil((window - 1 + c) / block_size)
// + 1 window blocks, and the c of one step sum to max_batch_tokens at most.)
int64_t window_pool_blocks(const EngineConfig& config, int64_t sliding_window);

struct KvPoolSizes {
  int64_t blocks = 0;         // full-attention pool (every layer with one pool)
  int64_t window_blocks = 0;  // sliding-window pool; 0 = one pool
};

// Both pools' sizes. window_bytes_per_block == 0: one pool, as
// resolve_kv_blocks. Else the window pool gets window_pool_blocks(), but
// at most budget / (bytes_per_block + window_bytes_per_block) (the blocks
// one pool would have had: neither group gets fewer than with one pool) and
// at least one sequence's window and step; the full-attention pool gets the
// rest of the budget. kv_num_blocks, when set, is the full-attention pool
// alone (the window pool then gets window_pool_blocks()). Throws Error when
// the budget cannot hold the window pool and one more block.
KvPoolSizes resolve_kv_pools(const EngineConfig& config, const model::ModelConfig& model, int64_t bytes_per_block,
                             int64_t window_bytes_per_block, int64_t mem_available);

// "preempt" | "queue" | "reject"; throws Error for anything else.
sched::KvExhaustedPolicy parse_kv_policy(const std::string& name);
PrefixIsolation parse_prefix_isolation(const std::string& name);  // "shared" | "tenant"

}  // namespace tokenmill::engine
