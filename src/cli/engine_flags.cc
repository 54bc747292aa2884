#include "cli/engine_flags.h"

#include <fmt/format.h>

#include <charconv>
#include <optional>
#include <set>
#include <sstream>

#include "engine/memory_budget.h"
#include "util/error.h"

namespace tokenmill::cli {

void add_kv_dtype_option(CLI::App& cmd, std::string& dtype) {
  cmd.add_option("--kv-dtype", dtype, "KV cache element type: " + kv::kv_dtype_choices())->capture_default_str();
}

void add_runtime_option(CLI::App& cmd, std::string& runtime) {
  cmd.add_option("--runtime", runtime,
                 "Weight runtime: auto (the file's tokenmill.weights.runtime)|dense|w8a8|fp8_e4m3")
      ->capture_default_str();
}

kv::KvDtype parse_kv_dtype(const std::string& name) {
  const std::optional<kv::KvDtype> dtype = kv::kv_dtype_from_name(name);
  if (!dtype) fail("--kv-dtype '{}' is not one of: {}", name, kv::kv_dtype_choices());
  return *dtype;
}

RuntimeModel::RuntimeModel(std::unique_ptr<model::Model> model, std::unique_ptr<quant::WeightRuntimeHook> hook)
    : model_(std::move(model)), hook_(std::move(hook)) {
  model_->set_matmul_hook(hook_.get());
}

RuntimeModel::~RuntimeModel() { model_->set_matmul_hook(nullptr); }

std::string RuntimeModel::runtime_name() const { return cli::runtime_name(hook_.get()); }

std::unique_ptr<RuntimeModel> load_runtime_model(const std::string& path, const std::string& runtime,
                                                 const model::RopeOverrides& rope) {
  std::unique_ptr<model::Model> m = model::Model::load(path, nullptr, rope);
  print_notices(m->notices());
  std::unique_ptr<quant::WeightRuntimeHook> hook = quant::make_weight_runtime(*m, runtime);
  return std::make_unique<RuntimeModel>(std::move(m), std::move(hook));
}

std::string runtime_name(const model::MatmulHook* hook) {
  const auto* runtime = dynamic_cast<const quant::WeightRuntimeHook*>(hook);
  return runtime ? std::string(quant::runtime_name(runtime->runtime())) : "dense";
}

void add_engine_flags(CLI::App& cmd, EngineFlags& f, EngineFlagSet set) {
  cmd.add_option("-t,--threads", f.threads, "Compute threads (default: all cores)");
  cmd.add_option("--kv-memory", f.kv_memory, "KV cache budget, e.g. 2G (default: --kv-fraction of free RAM)");
  cmd.add_option("--kv-fraction", f.kv_fraction, "Fraction of MemAvailable for the KV cache")->capture_default_str();
  cmd.add_option("--block-size", f.block_size, "KV block size in positions")->capture_default_str();
  add_kv_dtype_option(cmd, f.kv_dtype);
  add_runtime_option(cmd, f.runtime);
  cmd.add_option("--max-batch-tokens", f.max_batch_tokens, "Tokens per step")->capture_default_str();
  cmd.add_option("--max-seqs", f.max_seqs, "Sequences running at once")->capture_default_str();
  cmd.add_option("--prefill-chunk", f.prefill_chunk, "Prefill chunk; 0 = unchunked")->capture_default_str();
  if (set == EngineFlagSet::kRun)
    cmd.add_option("-c,--ctx-size,--max-model-len", f.max_model_len,
                   "Context size (default: prompt + n, capped by the model's; beyond it extends the context, warning "
                   "unless RoPE is scaled; a --kv-policy that evicts runs past it)");
  if (set == EngineFlagSet::kServe) {
    cmd.add_option("-c,--ctx-size,--max-model-len", f.max_model_len,
                   "Prompt + max_tokens cap; 0 = the model's context; beyond it extends the context (warns "
                   "unless RoPE is scaled)")
        ->capture_default_str();
    cmd.add_option("--max-waiting", f.max_waiting, "Waiting-queue bound (429 beyond); 0 = none")->capture_default_str();
    cmd.add_option("--slo-ttft-ms", f.slo_ttft_ms,
                   "SLO-aware admission: refuse (503 slo_unattainable) requests forecast to wait longer than this "
                   "for their first token; 0 = no target")
        ->capture_default_str();
    cmd.add_option("--slo-tpot-ms", f.slo_tpot_ms,
                   "SLO-aware admission: target time per output token, for the new request and the running ones")
        ->capture_default_str();
    cmd.add_option("--slo-e2e-p99-ms,--slo-e2e-ms", f.slo_e2e_ms,
                   "SLO-aware admission: target end-to-end latency of each admitted request")
        ->capture_default_str();
  }
  cmd.add_option("--kv-exhausted", f.kv_exhausted, "When KV runs out: preempt|queue|reject")->capture_default_str();
  add_kv_policy_flags(cmd, {f.kv_policy, f.kv_sinks, f.kv_window, f.kv_budget, f.kv_positions},
                      /*older_spelling=*/true);
  cmd.add_flag("--no-prefix-cache", f.no_prefix_cache, "Disable the prefix cache");
  cmd.add_flag("--no-window-pool", f.no_window_pool,
               "Keep sliding-window layers' K/V in the one pool for every position (gemma3)");
  cmd.add_option("--prefix-isolation", f.isolation,
                 set == EngineFlagSet::kServe ? "shared|tenant (tenant: X-Tenant header)" : "shared|tenant")
      ->capture_default_str();
  cmd.add_option("--priority-aging", f.aging_s, "Seconds per priority class of aging")->capture_default_str();
  add_spec_flags(cmd, f.spec);
  add_rope_flags(cmd, f.rope);
  // serve only: a benchmark run builds several engines, each would need its workers anew.
  if (set == EngineFlagSet::kServe) {
    add_parallel_flags(cmd, f.parallel);
    cmd.add_option("--tenant-limit", f.tenant_limits,
                   "Per-tenant bounds, TENANT:running=N,waiting=N,prefix_blocks=N ('*' = each other tenant; "
                   "repeatable)");
  }
}

void add_kv_policy_flags(CLI::App& cmd, const KvPolicyFlagRefs& f, bool older_spelling) {
  cmd.add_option("--kv-policy", f.policy,
                 std::string("What a long sequence keeps in its KV cache: full, streaming (attention sinks + recent "
                             "window) or h2o (sinks + window + the most-attended blocks, within --kv-budget)") +
                     (older_spelling ? " (preempt|queue|reject: the older spelling of --kv-exhausted)" : ""))
      ->capture_default_str();
  cmd.add_option("--kv-sinks", f.sinks, "streaming/h2o: first positions always kept (rounded up to blocks)")
      ->capture_default_str();
  cmd.add_option("--kv-window", f.window, "streaming/h2o: most recent positions kept")->capture_default_str();
  cmd.add_option("--kv-budget", f.budget, "h2o: most positions a sequence keeps (sinks + window + heavy hitters)")
      ->capture_default_str();
  cmd.add_option("--kv-positions", f.positions,
                 "streaming/h2o: preserve (keys keep their true RoPE positions) or rerotate (positions are cache "
                 "slots; moved keys are rotated back, so a sequence may run past the trained context)")
      ->capture_default_str();
}

sched::TenantPolicy parse_tenant_limits(const std::vector<std::string>& specs) {
  sched::TenantPolicy policy;
  std::set<std::string> seen;
  for (const std::string& spec : specs) {
    const size_t colon = spec.rfind(':');
    if (colon == std::string::npos || colon == 0)
      fail("--tenant-limit '{}': expected TENANT:running=N,waiting=N,prefix_blocks=N", spec);
    const std::string tenant = spec.substr(0, colon);
    if (!seen.insert(tenant).second) fail("--tenant-limit: tenant '{}' is given twice", tenant);
    sched::TenantLimits l;
    std::stringstream items(spec.substr(colon + 1));
    for (std::string item; std::getline(items, item, ',');) {
      const size_t eq = item.find('=');
      const std::string key = item.substr(0, eq);
      int64_t value = -1;
      if (eq != std::string::npos) {
        const std::string v = item.substr(eq + 1);
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
        if (ec != std::errc() || end != v.data() + v.size()) value = -1;
      }
      if (value < 0) fail("--tenant-limit '{}': '{}' must be KEY=N with N >= 0", spec, item);
      if (key == "running") {
        l.max_running = value;
      } else if (key == "waiting") {
        l.max_waiting = value;
      } else if (key == "prefix_blocks") {
        l.max_prefix_blocks = value;
      } else {
        fail("--tenant-limit '{}': unknown key '{}' (running, waiting, prefix_blocks)", spec, key);
      }
    }
    if (tenant == "*") {
      policy.defaults = l;
    } else {
      policy.tenants[tenant] = l;
    }
  }
  return policy;
}

void add_spec_flags(CLI::App& cmd, SpecFlags& f) {
  cmd.add_option("--spec", f.method,
                 "Speculative decoding: none|ngram (prompt lookup)|self (the model with layers skipped "
                 "drafts)|draft (--draft-model drafts)")
      ->capture_default_str();
  cmd.add_option("--spec-k", f.k, "Most draft tokens verified per step")->capture_default_str();
  cmd.add_flag("--spec-fixed-k", f.fixed_k,
               "Always draft k tokens (default: as many as the measured acceptance and step costs say pay)");
  cmd.add_option("--spec-skip-layers", f.skip_layers,
                 "--spec self: layers the draft skips, e.g. 4-11, 2,5,7-9, or a fraction (centred run)")
      ->capture_default_str();
  cmd.add_option("--draft-model", f.draft_model, "--spec draft: a smaller GGUF with the same vocabulary")
      ->check(CLI::ExistingFile);
  cmd.add_option("--spec-ngram-min", f.ngram_min, "Shortest suffix prompt lookup matches")->capture_default_str();
  cmd.add_option("--spec-ngram-max", f.ngram_max, "Longest suffix prompt lookup matches")->capture_default_str();
}

spec::SpecConfig spec_config(const SpecFlags& f) {
  spec::SpecConfig c;
  c.method = spec::parse_spec_method(f.method);
  c.ngram = {f.k, f.ngram_min, f.ngram_max};
  c.skip_layers = f.skip_layers;
  c.draft_model = f.draft_model;
  c.adaptive = !f.fixed_k;
  c.validate();
  return c;
}

engine::MatmulHookFactory runtime_hook_factory(const std::string& runtime) {
  // Checked before the (possibly long) model load; the file-dependent part
  // (does it hold matrices this runtime can run?) is checked after it.
  if (runtime != "auto" && !quant::runtime_from_name(runtime))
    fail("--runtime '{}': use auto, dense, w8a8 or fp8_e4m3", runtime);
  return [runtime](const model::Model& m) -> std::unique_ptr<model::MatmulHook> {
    return quant::make_weight_runtime(m, runtime);
  };
}

kv::KvPolicy kv_policy(const EngineFlags& f) {
  // The older spelling --kv-policy preempt|queue|reject keeps the full cache.
  if (f.kv_policy == "preempt" || f.kv_policy == "queue" || f.kv_policy == "reject") return {};
  if (!kv::kv_policy_kind_from_name(f.kv_policy))
    fail("--kv-policy '{}' is not one of: full, streaming, h2o (or preempt, queue, reject: see --kv-exhausted)",
         f.kv_policy);
  return kv::make_kv_policy(f.kv_policy, f.kv_sinks, f.kv_window, f.kv_positions, f.kv_budget);
}

engine::EngineConfig engine_config(const std::string& model_path, const EngineFlags& f) {
  engine::EngineConfig c;
  c.model_path = model_path;
  c.num_threads = f.threads;
  if (!f.kv_memory.empty()) c.kv_memory_bytes = engine::parse_byte_size(f.kv_memory);
  c.kv_memory_fraction = f.kv_fraction;
  c.block_size = f.block_size;
  c.kv_dtype = parse_kv_dtype(f.kv_dtype);
  c.matmul_hook_factory = runtime_hook_factory(f.runtime);
  c.max_batch_tokens = f.max_batch_tokens;
  c.max_seqs = f.max_seqs;
  c.prefill_chunk = f.prefill_chunk;
  c.max_model_len = f.max_model_len;
  c.rope = rope_overrides(f.rope, f.max_model_len);
  c.max_waiting = f.max_waiting;
  c.slo = {f.slo_ttft_ms, f.slo_tpot_ms, f.slo_e2e_ms};
  c.kv_exhausted = engine::parse_kv_policy(f.kv_exhausted);
  c.kv_policy = kv_policy(f);
  if (!kv::kv_policy_kind_from_name(f.kv_policy)) {  // the older spelling of --kv-exhausted
    const sched::KvExhaustedPolicy old = engine::parse_kv_policy(f.kv_policy);
    if (f.kv_exhausted != "preempt" && c.kv_exhausted != old)
      fail("--kv-policy {} and --kv-exhausted {} disagree", f.kv_policy, f.kv_exhausted);
    c.kv_exhausted = old;
  }
  c.prefix_cache = !f.no_prefix_cache;
  c.kv_window_pool = !f.no_window_pool;
  c.prefix_isolation = engine::parse_prefix_isolation(f.isolation);
  c.priority_aging_s = f.aging_s;
  c.spec = spec_config(f.spec);
  sched::TenantPolicy tenants = parse_tenant_limits(f.tenant_limits);
  c.tenant_limits = std::move(tenants.tenants);
  c.default_tenant_limits = tenants.defaults;
  c.validate();
  return c;
}

std::string kv_summary(const engine::Engine& e) {
  const std::string window =
      e.num_window_kv_blocks() > 0 ? fmt::format(" + {} window", e.num_window_kv_blocks()) : std::string();
  return fmt::format("KV {}: {} bytes/token, {}{} blocks x {} = {} bytes ({:.1f} MiB); weights runtime {}",
                     kv::kv_dtype_name(e.config().kv_dtype), e.kv_bytes_per_token(), e.num_kv_blocks(), window,
                     e.config().block_size, e.kv_bytes(), static_cast<double>(e.kv_bytes()) / (1 << 20),
                     runtime_name(e.matmul_hook()));
}

}  // namespace tokenmill::cli
