#include "engine/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "spec/ngram_proposer.h"
#include "util/check.h"

namespace tokenmill::engine {

Histogram Histogram::with_bounds(std::vector<double> bounds) {
  TM_CHECK(std::is_sorted(bounds.begin(), bounds.end()));
  Histogram h;
  h.counts.assign(bounds.size() + 1, 0);
  h.bounds = std::move(bounds);
  return h;
}

void Histogram::observe(double value) {
  const auto it = std::lower_bound(bounds.begin(), bounds.end(), value);  // first bound >= value
  ++counts[static_cast<size_t>(it - bounds.begin())];
  ++count;
  sum += value;
}

double Histogram::quantile(double q) const {
  if (count == 0) return 0.0;
  const double target = std::clamp(q, 0.0, 1.0) * static_cast<double>(count);
  double seen = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double c = static_cast<double>(counts[i]);
    if (c > 0 && seen + c >= target) {
      const double lo = i == 0 ? 0.0 : bounds[i - 1];
      if (i == bounds.size()) return lo;  // overflow bucket: no upper edge
      return lo + (bounds[i] - lo) * std::clamp((target - seen) / c, 0.0, 1.0);
    }
    seen += c;
  }
  return bounds.empty() ? 0.0 : bounds.back();
}

std::vector<double> latency_bounds_ms() {
  return {1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000};
}

std::vector<double> token_latency_bounds_ms() {
  return {0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000};
}

std::vector<double> accepted_length_bounds() {
  std::vector<double> bounds;
  for (int32_t n = 0; n <= spec::kMaxDraft; ++n) bounds.push_back(n);
  return bounds;
}

uint64_t MetricsSnapshot::requests_finished_total() const {
  return std::accumulate(requests_finished.begin(), requests_finished.end(), uint64_t{0});
}

uint64_t MetricsSnapshot::requests_rejected_total() const {
  return std::accumulate(requests_rejected.begin(), requests_rejected.end(), uint64_t{0});
}

Metrics::Metrics() {
  s_.queue_ms = Histogram::with_bounds(latency_bounds_ms());
  s_.ttft_ms = Histogram::with_bounds(latency_bounds_ms());
  s_.e2e_ms = Histogram::with_bounds(latency_bounds_ms());
  s_.tpot_ms = Histogram::with_bounds(token_latency_bounds_ms());
  s_.itl_ms = Histogram::with_bounds(token_latency_bounds_ms());
  s_.step_ms = Histogram::with_bounds(token_latency_bounds_ms());
  s_.spec_accepted_length = Histogram::with_bounds(accepted_length_bounds());
  for (SloPredictionStats& p : s_.slo_prediction) p.ratio = Histogram::with_bounds(prediction_ratio_bounds());
}

void Metrics::reset_counts() {
  const MetricsSnapshot fresh = Metrics().snapshot();
  std::lock_guard<std::mutex> lock(mutex_);
  MetricsSnapshot keep = std::move(s_);
  s_ = fresh;
  s_.spec_step_fixed_ms = keep.spec_step_fixed_ms;
  s_.spec_step_per_token_ms = keep.spec_step_per_token_ms;
  s_.spec_draft_ms_per_token = keep.spec_draft_ms_per_token;
  s_.slo_step_fixed_ms = keep.slo_step_fixed_ms;
  s_.slo_step_per_decode_ms = keep.slo_step_per_decode_ms;
  s_.slo_step_per_prefill_token_ms = keep.slo_step_per_prefill_token_ms;
  s_.prefill_seconds_per_token = keep.prefill_seconds_per_token;
  s_.expert_tokens.assign(keep.expert_tokens.size(), 0);
  s_.parallel_tp = keep.parallel_tp;
  s_.parallel_pp = keep.parallel_pp;
  s_.parallel_ep = keep.parallel_ep;
  s_.kv_dtype = std::move(keep.kv_dtype);
  s_.kv_bytes_per_token = keep.kv_bytes_per_token;
  s_.kv_bytes_total = keep.kv_bytes_total;
  // The gauges and the scheduler's cumulative counters, as of now.
  s_.running = keep.running;
  s_.waiting = keep.waiting;
  s_.paused = keep.paused;
  s_.free_seq_slots = keep.free_seq_slots;
  s_.kv_blocks_total = keep.kv_blocks_total;
  s_.kv_blocks_used = keep.kv_blocks_used;
  s_.kv_blocks_free = keep.kv_blocks_free;
  s_.kv_blocks_evictable = keep.kv_blocks_evictable;
  s_.kv_blocks_high_water = keep.kv_blocks_high_water;
  s_.kv_window_blocks_total = keep.kv_window_blocks_total;
  s_.kv_window_blocks_used = keep.kv_window_blocks_used;
  s_.prefix_cache_blocks = keep.prefix_cache_blocks;
  s_.preemptions = keep.preemptions;
  s_.kv_evicted_tokens = keep.kv_evicted_tokens;
  s_.prefix_cache_lookups = keep.prefix_cache_lookups;
  s_.prefix_cache_hit_tokens = keep.prefix_cache_hit_tokens;
  s_.prefix_cache_miss_tokens = keep.prefix_cache_miss_tokens;
  s_.prefix_cache_evictions = keep.prefix_cache_evictions;
}

std::vector<double> prediction_ratio_bounds() { return {0.25, 0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 4.0}; }

const char* slo_metric_name(SloMetric metric) { return metric == SloMetric::kTtft ? "ttft" : "tpot"; }

void Metrics::set_slo_step_cost(double fixed_ms, double per_decode_ms, double per_prefill_token_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  s_.slo_step_fixed_ms = fixed_ms;
  s_.slo_step_per_decode_ms = per_decode_ms;
  s_.slo_step_per_prefill_token_ms = per_prefill_token_ms;
}

void Metrics::on_slo_prediction(SloMetric metric, double forecast_ms, double actual_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  SloPredictionStats& p = s_.slo_prediction[static_cast<size_t>(metric)];
  ++p.count;
  p.error_seconds_sum += (actual_ms - forecast_ms) / 1e3;
  p.abs_error_seconds_sum += std::abs(actual_ms - forecast_ms) / 1e3;
  if (forecast_ms > 0) p.ratio.observe(actual_ms / forecast_ms);
}

void Metrics::on_submit() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++s_.requests_submitted;
}

void Metrics::on_reject(RejectReason reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++s_.requests_rejected[static_cast<size_t>(reason)];
}

void Metrics::on_finish(const FinalEvent& f) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++s_.requests_finished[static_cast<size_t>(f.reason)];
  if (f.reason == FinishReason::kRejected) return;  // never ran: no latencies
  if (f.sample_index == 0) {                        // parallel samples share their prompt: count it once
    s_.prompt_tokens += static_cast<uint64_t>(f.usage.prompt_tokens);
    s_.cached_prompt_tokens += static_cast<uint64_t>(f.usage.cached_prompt_tokens);
  }
  if (!f.embedding.empty()) {
    ++s_.embedding_requests;
    s_.embedding_tokens += static_cast<uint64_t>(f.usage.prompt_tokens);
  }
  s_.e2e_ms.observe(f.timings.e2e_ms);
  if (f.usage.completion_tokens > 0) {
    s_.queue_ms.observe(f.timings.queue_ms);
    s_.ttft_ms.observe(f.timings.ttft_ms);
  }
  if (f.usage.completion_tokens > 1) s_.tpot_ms.observe(f.timings.tpot_ms);
}

void Metrics::on_token_gap(double ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  s_.itl_ms.observe(ms);
}

void Metrics::on_step(const StepStats& step) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++s_.steps;
  s_.prefill_tokens += static_cast<uint64_t>(step.prefill_tokens);
  s_.decode_tokens += static_cast<uint64_t>(step.decode_tokens);
  s_.generated_tokens += static_cast<uint64_t>(step.sampled_tokens);
  s_.spec_draft_tokens += static_cast<uint64_t>(step.draft_tokens);
  s_.spec_accepted_tokens += static_cast<uint64_t>(step.accepted_tokens);
  s_.spec_draft_seconds += step.draft_ms / 1e3;
  s_.step_seconds += step.step_ms / 1e3;
  s_.step_ms.observe(step.step_ms);
  const auto kind = static_cast<size_t>(step.prefill_tokens > 0 ? StepKind::kPrefill : StepKind::kDecode);
  ++s_.steps_by_kind[kind];
  const std::array<double, kNumStepPhases> phases = step_phase_ms(step);
  for (size_t p = 0; p < phases.size(); ++p) s_.step_phase_seconds[kind][p] += phases[p] / 1e3;
  if (step.prefill_tokens > 0) {
    // Every token of the pass counts: decodes riding along cost about as much.
    const double tokens = static_cast<double>(step.prefill_tokens + step.decode_tokens + step.draft_tokens);
    const double per_token = step.forward_ms / 1e3 / tokens;
    constexpr double kWeight = 1.0 / 8;
    s_.prefill_seconds_per_token = s_.prefill_seconds_per_token == 0
                                       ? per_token
                                       : (1 - kWeight) * s_.prefill_seconds_per_token + kWeight * per_token;
  }
  s_.comm_bytes += static_cast<uint64_t>(step.comm_bytes);
  s_.comm_syncs += static_cast<uint64_t>(step.comm_syncs);
  if (!step.expert_tokens.empty()) {
    s_.expert_tokens.resize(step.expert_tokens.size(), 0);
    for (size_t e = 0; e < step.expert_tokens.size(); ++e)
      s_.expert_tokens[e] += static_cast<uint64_t>(step.expert_tokens[e]);
    s_.expert_imbalance_sum += step.expert_imbalance;
    ++s_.expert_steps;
  }
  s_.last_step = step;
}

double expert_imbalance(std::span<const int64_t> per_layer, int64_t n_expert) {
  if (n_expert <= 0 || per_layer.empty()) return 0;
  const int64_t layers = static_cast<int64_t>(per_layer.size()) / n_expert;
  double sum = 0;
  int64_t counted = 0;
  for (int64_t l = 0; l < layers; ++l) {
    const std::span<const int64_t> row =
        per_layer.subspan(static_cast<size_t>(l * n_expert), static_cast<size_t>(n_expert));
    const int64_t total = std::accumulate(row.begin(), row.end(), int64_t{0});
    if (total == 0) continue;
    sum += static_cast<double>(*std::max_element(row.begin(), row.end())) * static_cast<double>(n_expert) /
           static_cast<double>(total);
    ++counted;
  }
  return counted > 0 ? sum / static_cast<double>(counted) : 0.0;
}

void Metrics::set_parallel_layout(int tp, int pp, int ep) {
  std::lock_guard<std::mutex> lock(mutex_);
  s_.parallel_tp = tp;
  s_.parallel_pp = pp;
  s_.parallel_ep = ep;
}

const char* step_phase_name(StepPhase phase) {
  switch (phase) {
    case StepPhase::kSchedule: return "schedule";
    case StepPhase::kDrafting: return "drafting";
    case StepPhase::kCompute: return "compute";
    case StepPhase::kCommunication: return "communication";
    case StepPhase::kSampling: return "sampling";
  }
  return "?";
}

const char* step_kind_name(StepKind kind) { return kind == StepKind::kPrefill ? "prefill" : "decode"; }

std::array<double, kNumStepPhases> step_phase_ms(const StepStats& s) {
  std::array<double, kNumStepPhases> p{};
  const double draft_comm = std::max(0.0, s.comm_ms - s.forward_comm_ms);
  p[static_cast<size_t>(StepPhase::kDrafting)] = std::max(0.0, s.draft_ms - draft_comm);
  p[static_cast<size_t>(StepPhase::kCompute)] = std::max(0.0, s.forward_ms - s.forward_comm_ms);
  p[static_cast<size_t>(StepPhase::kCommunication)] = s.comm_ms;
  p[static_cast<size_t>(StepPhase::kSampling)] = s.sampling_ms;
  const double rest = s.step_ms - p[1] - p[2] - p[3] - p[4];
  p[static_cast<size_t>(StepPhase::kSchedule)] = std::max(0.0, rest);
  return p;
}

void Metrics::on_spec_verified(int64_t accepted) {
  std::lock_guard<std::mutex> lock(mutex_);
  s_.spec_accepted_length.observe(static_cast<double>(accepted));
}

void Metrics::set_spec_cost(double fixed_ms, double per_token_ms, double draft_ms_per_token) {
  std::lock_guard<std::mutex> lock(mutex_);
  s_.spec_step_fixed_ms = fixed_ms;
  s_.spec_step_per_token_ms = per_token_ms;
  s_.spec_draft_ms_per_token = draft_ms_per_token;
}

void Metrics::on_cow_copies(uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  s_.cow_copies += n;
}

PrefixStats& Metrics::labelled_prefix_stats(std::vector<PrefixStats>& all, std::string_view label) {
  const auto find = [&](std::string_view name) {
    return std::find_if(all.begin(), all.end(), [&](const PrefixStats& t) { return t.label == name; });
  };
  auto it = find(label);
  if (it != all.end()) return *it;
  // Count the tenants with their own label (not "_other").
  const size_t own = all.size() - (find(kOtherTenants) != all.end() ? 1 : 0);
  const std::string_view kept = own < kMaxTenantLabels ? label : kOtherTenants;
  it = find(kept);
  if (it != all.end()) return *it;
  all.push_back(PrefixStats{std::string(kept)});
  return all.back();
}

void Metrics::on_prefix_lookup(std::string_view tenant, std::string_view adapter, int64_t hit_tokens,
                               const kv::PrefixMissCounts& miss_tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (PrefixStats* t :
       {&labelled_prefix_stats(s_.prefix_by_tenant, tenant), &labelled_prefix_stats(s_.prefix_by_adapter, adapter)}) {
    t->hit_tokens += static_cast<uint64_t>(hit_tokens);
    for (size_t r = 0; r < miss_tokens.size(); ++r) t->miss_tokens[r] += static_cast<uint64_t>(miss_tokens[r]);
  }
  s_.prefix_cache_saved_prefill_seconds += static_cast<double>(hit_tokens) * s_.prefill_seconds_per_token;
}

void Metrics::set_kv_layout(std::string_view dtype, int64_t bytes_per_token, int64_t total_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  s_.kv_dtype = std::string(dtype);
  s_.kv_bytes_per_token = bytes_per_token;
  s_.kv_bytes_total = total_bytes;
}

void Metrics::set_scheduler_gauges(const SchedulerGauges& g) {
  std::lock_guard<std::mutex> lock(mutex_);
  s_.running = g.running;
  s_.waiting = g.waiting;
  s_.paused = g.paused;
  s_.free_seq_slots = g.free_seq_slots;
  s_.kv_blocks_total = g.kv_blocks_total;
  s_.kv_blocks_used = g.kv_blocks_used;
  s_.kv_blocks_free = g.kv_blocks_free;
  s_.kv_blocks_evictable = g.kv_blocks_evictable;
  s_.kv_blocks_high_water = g.kv_blocks_high_water;
  s_.kv_window_blocks_total = g.kv_window_blocks_total;
  s_.kv_window_blocks_used = g.kv_window_blocks_used;
  s_.prefix_cache_blocks = g.prefix_cache_blocks;
  s_.preemptions = g.preemptions;
  s_.kv_evicted_tokens = g.kv_evicted_tokens;
  s_.prefix_cache_lookups = g.prefix_cache_lookups;
  s_.prefix_cache_hit_tokens = g.prefix_cache_hit_tokens;
  s_.prefix_cache_miss_tokens = g.prefix_cache_miss_tokens;
  s_.prefix_cache_evictions = g.prefix_cache_evictions;
}

MetricsSnapshot Metrics::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return s_;
}

}  // namespace tokenmill::engine
