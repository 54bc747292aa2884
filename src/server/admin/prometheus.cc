#include "server/admin/prometheus.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "kv/prefix_miss.h"

namespace tokenmill::server {

std::string prometheus_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

std::string prometheus_label(std::string_view key, std::string_view value) {
  std::string out = std::string(key) + "=\"";
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void PrometheusWriter::family(std::string_view name, std::string_view type, std::string_view help) {
  text_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void PrometheusWriter::sample(std::string_view name, std::string_view labels, double value) {
  if (labels.empty()) {
    text_ += fmt::format("{} {}\n", name, prometheus_number(value));
  } else {
    text_ += fmt::format("{}{{{}}} {}\n", name, labels, prometheus_number(value));
  }
}

void PrometheusWriter::counter(std::string_view name, std::string_view help, double value) {
  family(name, "counter", help);
  sample(name, "", value);
}

void PrometheusWriter::gauge(std::string_view name, std::string_view help, double value) {
  family(name, "gauge", help);
  sample(name, "", value);
}

void PrometheusWriter::histogram(std::string_view name, std::string_view help, const engine::Histogram& h,
                                 double scale) {
  family(name, "histogram", help);
  const std::string bucket = std::string(name) + "_bucket";
  uint64_t running = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    running += i < h.counts.size() ? h.counts[i] : 0;
    sample(bucket, prometheus_label("le", prometheus_number(h.bounds[i] * scale)), static_cast<double>(running));
  }
  sample(bucket, prometheus_label("le", "+Inf"), static_cast<double>(h.count));
  sample(std::string(name) + "_sum", "", h.sum * scale);
  sample(std::string(name) + "_count", "", static_cast<double>(h.count));
}

namespace {

void write_requests(PrometheusWriter& w, const engine::MetricsSnapshot& m) {
  w.counter("tokenmill_requests_submitted_total", "Requests submitted to the engine.",
            static_cast<double>(m.requests_submitted));
  w.family("tokenmill_requests_finished_total", "counter", "Requests finished, by how they ended.");
  for (int i = 1; i < engine::kNumFinishReasons; ++i) {  // not kNone
    const auto reason = static_cast<engine::FinishReason>(i);
    w.sample("tokenmill_requests_finished_total", prometheus_label("reason", engine::finish_reason_name(reason)),
             static_cast<double>(m.requests_finished[static_cast<size_t>(i)]));
  }
  w.family("tokenmill_requests_rejected_total", "counter", "Requests refused by the engine, by reason.");
  for (int i = 1; i < engine::kNumRejectReasons; ++i) {
    const auto reason = static_cast<engine::RejectReason>(i);
    w.sample("tokenmill_requests_rejected_total", prometheus_label("reason", engine::reject_reason_name(reason)),
             static_cast<double>(m.requests_rejected[static_cast<size_t>(i)]));
  }
}

// Mixture-of-experts models only: tokens per expert (summed over this
// rank's layers) since start and in the last step, and the load imbalance.
void write_expert_load(PrometheusWriter& w, const engine::MetricsSnapshot& m) {
  if (m.expert_tokens.empty()) return;
  w.family("tokenmill_moe_expert_tokens_total", "counter",
           "Tokens each expert ran, summed over the layers (a token counts once per layer it visits the expert).");
  for (size_t e = 0; e < m.expert_tokens.size(); ++e)
    w.sample("tokenmill_moe_expert_tokens_total", prometheus_label("expert", std::to_string(e)),
             static_cast<double>(m.expert_tokens[e]));
  w.family("tokenmill_moe_step_expert_tokens", "gauge",
           "Tokens each expert ran in the last step, summed over the layers.");
  for (size_t e = 0; e < m.last_step.expert_tokens.size(); ++e)
    w.sample("tokenmill_moe_step_expert_tokens", prometheus_label("expert", std::to_string(e)),
             static_cast<double>(m.last_step.expert_tokens[e]));
  w.gauge(
      "tokenmill_moe_expert_imbalance",
      "Last step's expert load imbalance: per layer the busiest expert's tokens over the mean, averaged (1 = even).",
      m.last_step.expert_imbalance);
  w.gauge("tokenmill_moe_expert_imbalance_mean", "Expert load imbalance averaged over the steps since start.",
          m.expert_steps > 0 ? m.expert_imbalance_sum / static_cast<double>(m.expert_steps) : 0.0);
}

void write_tokens(PrometheusWriter& w, const engine::MetricsSnapshot& m) {
  w.counter("tokenmill_prompt_tokens_total", "Prompt tokens of finished requests.",
            static_cast<double>(m.prompt_tokens));
  w.counter("tokenmill_cached_prompt_tokens_total", "Prompt tokens served from the prefix cache.",
            static_cast<double>(m.cached_prompt_tokens));
  w.counter("tokenmill_generation_tokens_total", "Tokens generated (sampled).",
            static_cast<double>(m.generated_tokens));
  w.counter("tokenmill_embedding_requests_total", "Embedding requests answered with their vector (one per input).",
            static_cast<double>(m.embedding_requests));
  w.counter("tokenmill_embedding_prompt_tokens_total", "Prompt tokens of those embedding requests.",
            static_cast<double>(m.embedding_tokens));
  w.counter("tokenmill_prefill_tokens_total", "Tokens prefilled by engine steps (recomputation included).",
            static_cast<double>(m.prefill_tokens));
  w.counter("tokenmill_engine_steps_total", "Engine steps run.", static_cast<double>(m.steps));
}

// KV given up: preempted sequences, evicted positions, cached blocks.
void write_evictions(PrometheusWriter& w, const engine::MetricsSnapshot& m) {
  w.counter("tokenmill_preemptions_total", "Sequences preempted (KV freed, recomputed later).",
            static_cast<double>(m.preemptions));
  w.counter("tokenmill_kv_evicted_tokens_total",
            "KV positions evicted from the middle of long sequences by the KV policy (--kv-policy).",
            static_cast<double>(m.kv_evicted_tokens));
  w.counter("tokenmill_prefix_cache_evictions_total", "Cached KV blocks evicted.",
            static_cast<double>(m.prefix_cache_evictions));
}

void write_speculation(PrometheusWriter& w, const engine::MetricsSnapshot& m) {
  w.counter("tokenmill_spec_draft_tokens_total", "Speculative draft tokens proposed and verified.",
            static_cast<double>(m.spec_draft_tokens));
  w.counter("tokenmill_spec_accepted_tokens_total", "Speculative draft tokens the target accepted.",
            static_cast<double>(m.spec_accepted_tokens));
  w.gauge("tokenmill_spec_acceptance_rate", "Accepted / proposed speculative draft tokens since start (0 before any).",
          m.spec_draft_tokens > 0
              ? static_cast<double>(m.spec_accepted_tokens) / static_cast<double>(m.spec_draft_tokens)
              : 0.0);
  w.counter("tokenmill_spec_draft_seconds_total", "Time spent drafting (proposers, draft passes).",
            m.spec_draft_seconds);
  w.gauge("tokenmill_spec_step_fixed_seconds",
          "Adaptive speculation's fit: the part of a decode step's time every step pays once.",
          m.spec_step_fixed_ms / 1e3);
  w.gauge("tokenmill_spec_step_per_token_seconds", "Adaptive speculation's fit: a decode step's time per token.",
          m.spec_step_per_token_ms / 1e3);
  w.gauge("tokenmill_spec_draft_seconds_per_token", "Adaptive speculation's fit: drafting time per draft token.",
          m.spec_draft_ms_per_token / 1e3);
  w.gauge("tokenmill_spec_draft_time_share", "Drafting time / engine step time since start (0 before any step).",
          m.step_seconds > 0 ? m.spec_draft_seconds / m.step_seconds : 0.0);
}

// Step time by kind and phase, collectives, and the parallel layout.
void write_steps(PrometheusWriter& w, const engine::MetricsSnapshot& m) {
  w.family("tokenmill_step_phase_seconds", "counter",
           "Engine step time by step kind and phase (schedule, drafting, compute, communication, sampling).");
  for (int k = 0; k < engine::kNumStepKinds; ++k) {
    for (int p = 0; p < engine::kNumStepPhases; ++p) {
      const std::string labels = prometheus_label("step", engine::step_kind_name(static_cast<engine::StepKind>(k))) +
                                 "," +
                                 prometheus_label("phase", engine::step_phase_name(static_cast<engine::StepPhase>(p)));
      w.sample("tokenmill_step_phase_seconds", labels, m.step_phase_seconds[k][p]);
    }
  }
  w.family("tokenmill_steps_total", "counter", "Engine steps by kind (a step with prompt tokens is a prefill step).");
  for (int k = 0; k < engine::kNumStepKinds; ++k)
    w.sample("tokenmill_steps_total",
             prometheus_label("step", engine::step_kind_name(static_cast<engine::StepKind>(k))),
             static_cast<double>(m.steps_by_kind[k]));
  w.counter("tokenmill_comm_bytes_total", "Bytes this (root) rank moved in collectives with the other ranks.",
            static_cast<double>(m.comm_bytes));
  w.counter("tokenmill_comm_syncs_total", "Collective and point-to-point operations of this (root) rank.",
            static_cast<double>(m.comm_syncs));
  w.family("tokenmill_parallel_info", "gauge", "1, labelled with the model's layout over ranks.");
  w.sample("tokenmill_parallel_info",
           prometheus_label("tp", std::to_string(m.parallel_tp)) + "," +
               prometheus_label("pp", std::to_string(m.parallel_pp)) + "," +
               prometheus_label("ep", std::to_string(m.parallel_ep)) + "," +
               prometheus_label("ranks", std::to_string(std::max(m.parallel_tp, m.parallel_ep) * m.parallel_pp)),
           1.0);
}

// Every prompt token of an admitted request is a hit or a miss with one
// reason, counted once (at its first admission), by tenant: sums over the
// labels give the totals the unlabelled series used to.
// One labelled hit series and one labelled miss-by-reason series over
// `stats` (by tenant or by adapter, label `key`); adds the sums to
// hits/misses when given.
void write_prefix_split(PrometheusWriter& w, const std::vector<engine::PrefixStats>& stats, const char* key,
                        const std::string& hit_name, const std::string& hit_help, const std::string& miss_name,
                        const std::string& miss_help, uint64_t* hits = nullptr, uint64_t* misses = nullptr) {
  w.family(hit_name, "counter", hit_help);
  for (const engine::PrefixStats& t : stats) {
    w.sample(hit_name, prometheus_label(key, t.label), static_cast<double>(t.hit_tokens));
    if (hits != nullptr) *hits += t.hit_tokens;
  }
  w.family(miss_name, "counter", miss_help);
  for (const engine::PrefixStats& t : stats) {
    for (int r = 0; r < kv::kNumPrefixMissReasons; ++r) {
      const std::string labels =
          prometheus_label(key, t.label) + "," +
          prometheus_label("reason", kv::prefix_miss_reason_name(static_cast<kv::PrefixMissReason>(r)));
      w.sample(miss_name, labels, static_cast<double>(t.miss_tokens[r]));
      if (misses != nullptr) *misses += t.miss_tokens[r];
    }
  }
}

void write_prefix_cache(PrometheusWriter& w, const engine::MetricsSnapshot& m) {
  uint64_t hits = 0, misses = 0;
  write_prefix_split(
      w, m.prefix_by_tenant, "tenant", "tokenmill_prefix_cache_hit_tokens_total",
      "Prompt tokens served from the prefix cache, by tenant (the first 64 tenants; the rest as _other).",
      "tokenmill_prefix_cache_miss_tokens_total",
      "Prompt tokens not served from the prefix cache, by tenant and reason: no_overlap, evicted (approximate: "
      "recent evictions only), partial_block (beyond the lookup's reach), isolated (cached under another "
      "tenant or adapter), logprobs_bypass, disabled.",
      &hits, &misses);
  w.counter("tokenmill_prefix_cache_saved_prefill_seconds_total",
            "Prefill time saved by prefix-cache hits: hit tokens x the measured prefill seconds per token.",
            m.prefix_cache_saved_prefill_seconds);
  w.gauge("tokenmill_prefix_cache_blocks", "KV blocks held by the prefix cache (referenced or evictable).",
          static_cast<double>(m.prefix_cache_blocks));
  const double looked = static_cast<double>(hits + misses);
  w.gauge("tokenmill_prefix_cache_hit_ratio", "Prompt tokens hit / looked up in the prefix cache (0 before any).",
          looked > 0 ? static_cast<double>(hits) / looked : 0.0);
}

// The same hit/miss split by LoRA adapter ("" = the base model), and
// what the server's adapter table holds (docs/api.md, "LoRA adapters").
void write_lora(PrometheusWriter& w, const engine::MetricsSnapshot& m, const LoraServingStats& lora) {
  write_prefix_split(w, m.prefix_by_adapter, "adapter", "tokenmill_adapter_prefix_cache_hit_tokens_total",
                     "Prompt tokens served from the prefix cache, by LoRA adapter (\"\" = the base model; the first 64 "
                     "adapters; the rest as _other).",
                     "tokenmill_adapter_prefix_cache_miss_tokens_total",
                     "Prompt tokens not served from the prefix cache, by LoRA adapter and reason (the reasons of "
                     "tokenmill_prefix_cache_miss_tokens_total).");
  w.gauge("tokenmill_lora_adapters_loaded", "LoRA adapters requests can pick now.", static_cast<double>(lora.loaded));
  w.gauge("tokenmill_lora_adapters_draining", "LoRA adapters unloaded but still used by requests in flight.",
          static_cast<double>(lora.draining));
  w.family("tokenmill_adapter_requests_total", "counter",
           "Requests that picked a LoRA adapter, by adapter (the first 64 names; the rest as _other).");
  for (const auto& [name, n] : lora.requests)
    w.sample("tokenmill_adapter_requests_total", prometheus_label("adapter", name), static_cast<double>(n));
}

// Fixed at engine start; 0 and no info sample while the model loads.
// SLO-aware admission: the step costs it forecasts with and how far its
// forecasts were off for the admitted requests that completed.
void write_slo(PrometheusWriter& w, const engine::MetricsSnapshot& m) {
  w.gauge("tokenmill_slo_step_fixed_seconds", "SLO admission's step-cost model: what every step pays once.",
          m.slo_step_fixed_ms / 1e3);
  w.gauge("tokenmill_slo_step_per_decode_seconds", "SLO admission's step-cost model: each decoding row of a step.",
          m.slo_step_per_decode_ms / 1e3);
  w.gauge("tokenmill_slo_step_per_prefill_token_seconds", "SLO admission's step-cost model: each prefill token.",
          m.slo_step_per_prefill_token_ms / 1e3);
  // One sample per forecast metric (ttft, tpot) of a family.
  const auto by_metric = [&](const char* name, const char* help, auto value) {
    w.family(name, "counter", help);
    for (int k = 0; k < engine::kNumSloMetrics; ++k)
      w.sample(name, prometheus_label("metric", engine::slo_metric_name(static_cast<engine::SloMetric>(k))),
               value(m.slo_prediction[static_cast<size_t>(k)]));
  };
  by_metric("tokenmill_slo_forecasts_total", "Admitted requests whose forecast was checked against the actual.",
            [](const engine::SloPredictionStats& p) { return static_cast<double>(p.count); });
  by_metric("tokenmill_slo_forecast_error_seconds_sum",
            "Sum of actual - forecast (positive: the forecast was optimistic).",
            [](const engine::SloPredictionStats& p) { return p.error_seconds_sum; });
  by_metric("tokenmill_slo_forecast_abs_error_seconds_sum", "Sum of |actual - forecast|.",
            [](const engine::SloPredictionStats& p) { return p.abs_error_seconds_sum; });
  w.histogram("tokenmill_slo_ttft_forecast_ratio", "Actual / forecast time to first token of admitted requests.",
              m.slo_prediction[static_cast<size_t>(engine::SloMetric::kTtft)].ratio);
  w.histogram("tokenmill_slo_tpot_forecast_ratio", "Actual / forecast time per output token of admitted requests.",
              m.slo_prediction[static_cast<size_t>(engine::SloMetric::kTpot)].ratio);
}

void write_kv_layout(PrometheusWriter& w, const engine::MetricsSnapshot& m) {
  w.gauge("tokenmill_kv_bytes_per_token", "KV cache bytes per token: K and V of all layers, scales included.",
          static_cast<double>(m.kv_bytes_per_token));
  w.gauge("tokenmill_kv_cache_bytes", "Bytes of the KV cache pool.", static_cast<double>(m.kv_bytes_total));
  w.family("tokenmill_kv_cache_info", "gauge", "1, labelled with the KV cache element type.");
  if (!m.kv_dtype.empty()) w.sample("tokenmill_kv_cache_info", prometheus_label("dtype", m.kv_dtype), 1.0);
}

void write_gauges(PrometheusWriter& w, const engine::MetricsSnapshot& m) {
  w.gauge("tokenmill_requests_running", "Sequences in the running batch.", static_cast<double>(m.running));
  w.gauge("tokenmill_requests_waiting", "Sequences waiting for admission.", static_cast<double>(m.waiting));
  w.gauge("tokenmill_requests_paused", "Requests held by their client (backpressure), running or waiting.",
          static_cast<double>(m.paused));
  w.gauge("tokenmill_kv_blocks_total", "KV cache blocks in the pool.", static_cast<double>(m.kv_blocks_total));
  w.gauge("tokenmill_kv_blocks_used", "KV blocks referenced by live sequences.", static_cast<double>(m.kv_blocks_used));
  w.gauge("tokenmill_kv_blocks_free", "KV blocks on the free list.", static_cast<double>(m.kv_blocks_free));
  w.gauge("tokenmill_kv_blocks_evictable", "KV blocks held only by the prefix cache.",
          static_cast<double>(m.kv_blocks_evictable));
  w.gauge("tokenmill_kv_window_blocks_total", "Blocks of the sliding-window KV pool (0: one pool).",
          static_cast<double>(m.kv_window_blocks_total));
  w.gauge("tokenmill_kv_window_blocks_used", "Sliding-window KV blocks referenced by live sequences.",
          static_cast<double>(m.kv_window_blocks_used));
  w.gauge("tokenmill_kv_blocks_high_water", "Most KV blocks ever used at once.",
          static_cast<double>(m.kv_blocks_high_water));
  write_kv_layout(w, m);
  write_prefix_cache(w, m);
}

void write_http(PrometheusWriter& w, const HttpStatsSnapshot& http, std::string_view state) {
  w.family("tokenmill_http_responses_total", "counter", "HTTP responses by endpoint and status code.");
  for (const auto& [key, count] : http.responses) {
    w.sample("tokenmill_http_responses_total",
             prometheus_label("endpoint", key.first) + "," + prometheus_label("code", std::to_string(key.second)),
             static_cast<double>(count));
  }
  w.gauge("tokenmill_http_requests_in_flight", "Generation requests being answered.",
          static_cast<double>(http.in_flight));
  w.counter("tokenmill_http_client_disconnects_total", "Streams cancelled because the client disconnected.",
            static_cast<double>(http.client_disconnects));
  w.counter("tokenmill_http_auth_failures_total", "Requests refused for a missing or wrong API key.",
            static_cast<double>(http.auth_failures));
  w.counter("tokenmill_http_backpressure_pauses_total",
            "Times a stream was paused because its client had not taken --max-unsent-bytes.",
            static_cast<double>(http.backpressure_pauses));
  w.counter("tokenmill_http_stalled_clients_total",
            "Streams cancelled because the client took nothing for --stalled-client-timeout.",
            static_cast<double>(http.stalled_clients));
  const HttpFrontStats& f = http.front;
  w.gauge("tokenmill_http_connections_open", "Client connections open now.", static_cast<double>(f.connections_open));
  w.counter("tokenmill_http_connections_accepted_total", "Client connections accepted.",
            static_cast<double>(f.connections_accepted));
  w.counter("tokenmill_http_connections_refused_total",
            "Connections refused with 503 over --max-connections or --max-connections-per-client.",
            static_cast<double>(f.connections_refused));
  w.counter("tokenmill_http_request_timeouts_total", "Requests whose head or body did not arrive in time (408).",
            static_cast<double>(f.requests_timed_out));
  w.counter("tokenmill_http_malformed_requests_total",
            "Requests refused while parsing (400, 413, 431, 501, 505) before any handler ran.",
            static_cast<double>(f.requests_malformed));
  w.counter("tokenmill_http_write_timeouts_total",
            "Connections dropped because the client took no output for --write-timeout.",
            static_cast<double>(f.writes_timed_out));
  w.gauge("tokenmill_http_worker_threads", "Handler threads started so far (at most --http-threads).",
          static_cast<double>(f.workers));
  w.family("tokenmill_server_state", "gauge", "1 for the server's current state.");
  for (std::string_view s : {"loading", "ready", "overloaded", "stopping"})
    w.sample("tokenmill_server_state", prometheus_label("state", s), s == state ? 1.0 : 0.0);
}

}  // namespace

ProcessMemory parse_process_status(std::string_view status) {
  ProcessMemory m;
  std::istringstream in{std::string(status)};
  std::string key;
  while (in >> key) {
    int64_t kib = 0;
    if ((key == "VmRSS:" || key == "VmHWM:") && in >> kib)
      (key == "VmRSS:" ? m.resident : m.resident_high_water) = kib * 1024;
    in.ignore(1 << 20, '\n');
  }
  return m;
}

ProcessMemory read_process_memory() {
  std::ifstream in("/proc/self/status");
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return parse_process_status(s.str());
}

void fold_tenants(engine::MetricsSnapshot& m) {
  engine::PrefixStats all;
  all.label = std::string(kAllTenants);
  for (const engine::PrefixStats& t : m.prefix_by_tenant) {
    all.hit_tokens += t.hit_tokens;
    for (size_t r = 0; r < all.miss_tokens.size(); ++r) all.miss_tokens[r] += t.miss_tokens[r];
  }
  m.prefix_by_tenant.assign(1, std::move(all));
}

std::string render_metrics(const engine::MetricsSnapshot& m, const HttpStatsSnapshot& http, std::string_view state,
                           const ProcessMemory& memory, const LoraServingStats& lora) {
  PrometheusWriter w;
  w.histogram_ms("tokenmill_time_to_first_token_seconds", "Submit to first token.", m.ttft_ms);
  w.histogram_ms("tokenmill_time_per_output_token_seconds", "Mean decode time per token after the first, per request.",
                 m.tpot_ms);
  w.histogram_ms("tokenmill_inter_token_latency_seconds", "Every gap between consecutive tokens.", m.itl_ms);
  w.histogram_ms("tokenmill_e2e_request_latency_seconds", "Submit to the final event.", m.e2e_ms);
  w.histogram_ms("tokenmill_queue_time_seconds", "Submit to first scheduled.", m.queue_ms);
  w.histogram("tokenmill_spec_accepted_length", "Draft tokens accepted per verified draft.", m.spec_accepted_length);
  w.histogram_ms("tokenmill_engine_step_seconds", "Duration of one engine step.", m.step_ms);
  write_requests(w, m);
  write_tokens(w, m);
  write_speculation(w, m);
  write_steps(w, m);
  write_expert_load(w, m);
  write_evictions(w, m);
  write_gauges(w, m);
  write_http(w, http, state);
  write_lora(w, m, lora);
  write_slo(w, m);
  w.gauge("process_resident_memory_bytes", "Resident memory of the server process.",
          static_cast<double>(memory.resident));
  w.gauge("tokenmill_process_resident_memory_high_water_bytes", "Peak resident memory of the server process.",
          static_cast<double>(memory.resident_high_water));
  return w.text();
}

}  // namespace tokenmill::server
