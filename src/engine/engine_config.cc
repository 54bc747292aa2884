#include "engine/engine_config.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"
#include "util/int_math.h"

namespace tokenmill::engine {

void EngineConfig::validate() const {
  if (num_threads < 0) fail("threads must be >= 0, got {}", num_threads);
  spec.validate();
  if (kv_num_blocks < 0) fail("kv blocks must be >= 0, got {}", kv_num_blocks);
  if (kv_memory_bytes < 0) fail("kv memory must be >= 0 bytes, got {}", kv_memory_bytes);
  if (!(kv_memory_fraction > 0.0 && kv_memory_fraction <= 1.0))
    fail("kv memory fraction must be in (0, 1], got {}", kv_memory_fraction);
  if (block_size < 1 || block_size > 4096) fail("block size must be in [1, 4096], got {}", block_size);
  if (max_seqs < 1) fail("max seqs must be >= 1, got {}", max_seqs);
  if (max_batch_tokens < max_seqs)
    fail("max batch tokens ({}) must be at least max seqs ({})", max_batch_tokens, max_seqs);
  if (prefill_chunk < 0) fail("prefill chunk must be >= 0, got {}", prefill_chunk);
  if (max_model_len < 0) fail("max model len must be >= 0, got {}", max_model_len);
  if (max_waiting < 0) fail("max waiting must be >= 0, got {}", max_waiting);
  if (!(priority_aging_s >= 0.0)) fail("priority aging must be >= 0 seconds, got {}", priority_aging_s);
  slo.validate();
  kv_policy.validate();
  if (kv_policy.evicts() && spec.enabled())
    fail("--kv-policy {} does not combine with speculative decoding (--spec)", kv_policy.describe());
  if (kv_policy.evicts() && kv_policy.positions == kv::KvPositions::kRerotate && parallel)
    fail("--kv-positions rerotate does not combine with tensor or pipeline parallelism; use preserve");
  if (kv_policy.needs_attention_mass() && parallel)
    fail("--kv-policy h2o does not combine with tensor or pipeline parallelism (each rank sees its own heads)");
  if (kv::kv_keys_channel_scaled(kv_dtype) && parallel)
    fail(
        "--kv-dtype {} does not combine with tensor or pipeline parallelism (its key scales are measured in one "
        "process); use q4_0",
        kv::kv_dtype_name(kv_dtype));
  sched::TenantPolicy{tenant_limits, default_tenant_limits}.validate("tenant_limits", "default_tenant_limits");
}

namespace {

int64_t budget_bytes(const EngineConfig& config, int64_t mem_available) {
  if (config.kv_memory_bytes > 0) return config.kv_memory_bytes;
  return static_cast<int64_t>(std::floor(static_cast<double>(mem_available) * config.kv_memory_fraction));
}

// The full-attention (or only) pool from `budget` bytes.
int64_t blocks_from_budget(const EngineConfig& config, const model::ModelConfig& model, int64_t bytes_per_block,
                           int64_t budget) {
  const int64_t blocks = budget / bytes_per_block;
  if (blocks < 1) {
    fail("the KV memory budget ({} bytes) holds no block ({} bytes each); raise --kv-memory", budget, bytes_per_block);
  }
  // More blocks than max_seqs sequences of full context could hold would
  // only ever serve as prefix cache; that much is plenty.
  const int64_t max_len = config.max_model_len > 0 ? config.max_model_len : model.n_ctx_train;
  int64_t per_seq = (max_len + config.block_size - 1) / config.block_size;
  // A policy that evicts holds no more than its sinks, window and a step.
  if (config.kv_policy.evicts())
    per_seq = std::min(
        per_seq, config.kv_policy.max_blocks(config.block_size,
                                             sched::max_step_tokens(config.max_batch_tokens, config.prefill_chunk)));
  const int64_t cap = std::max<int64_t>(1, per_seq) * config.max_seqs;
  return std::min<int64_t>({blocks, cap, int64_t{1} << 30});
}

}  // namespace

int64_t resolve_kv_blocks(const EngineConfig& config, const model::ModelConfig& model, int64_t bytes_per_block,
                          int64_t mem_available) {
  if (config.kv_num_blocks > 0) return config.kv_num_blocks;
  return blocks_from_budget(config, model, bytes_per_block, budget_bytes(config, mem_available));
}

int64_t window_pool_blocks(const EngineConfig& config, int64_t sliding_window) {
  const int64_t bs = config.block_size;
  return config.max_seqs * (ceil_div(sliding_window, bs) + 2) + ceil_div(config.max_batch_tokens, bs);
}

KvPoolSizes resolve_kv_pools(const EngineConfig& config, const model::ModelConfig& model, int64_t bytes_per_block,
                             int64_t window_bytes_per_block, int64_t mem_available) {
  KvPoolSizes sizes;
  if (window_bytes_per_block == 0) {
    sizes.blocks = resolve_kv_blocks(config, model, bytes_per_block, mem_available);
    return sizes;
  }
  const int64_t ideal = window_pool_blocks(config, model.sliding_window);
  if (config.kv_num_blocks > 0) {
    sizes.blocks = config.kv_num_blocks;
    sizes.window_blocks = ideal;
    return sizes;
  }
  // Never more than the window layers' share of one pool (budget / bytes of
  // a whole-model block), so neither group ends up with fewer blocks than
  // one pool would give it; never less than one sequence's window and step.
  const int64_t budget = budget_bytes(config, mem_available);
  const int64_t share = budget / (bytes_per_block + window_bytes_per_block);
  const int64_t minimum = sched::window_blocks_per_step(
      model.sliding_window, config.block_size, sched::max_step_tokens(config.max_batch_tokens, config.prefill_chunk));
  sizes.window_blocks = std::max(std::min(ideal, share), minimum);
  const int64_t window_bytes = sizes.window_blocks * window_bytes_per_block;
  if (budget - window_bytes < bytes_per_block) {
    fail(
        "the KV memory budget ({} bytes) cannot hold one sequence's sliding-window blocks ({} blocks, {} bytes) "
        "and one full-attention block ({} bytes); raise --kv-memory",
        budget, sizes.window_blocks, window_bytes, bytes_per_block);
  }
  sizes.blocks = blocks_from_budget(config, model, bytes_per_block, budget - window_bytes);
  return sizes;
}

sched::KvExhaustedPolicy parse_kv_policy(const std::string& name) {
  if (name == "preempt") return sched::KvExhaustedPolicy::kPreempt;
  if (name == "queue") return sched::KvExhaustedPolicy::kQueue;
  if (name == "reject") return sched::KvExhaustedPolicy::kReject;
  fail("unknown KV-exhausted policy '{}' (use preempt, queue or reject)", name);
}

PrefixIsolation parse_prefix_isolation(const std::string& name) {
  if (name == "shared") return PrefixIsolation::kShared;
  if (name == "tenant") return PrefixIsolation::kTenant;
  fail("unknown prefix-cache isolation '{}' (use shared or tenant)", name);
}

}  // namespace tokenmill::engine
