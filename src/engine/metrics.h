// Engine metrics: counters, gauges and latency histograms, recorded by the
// engine thread and read by anyone through snapshot() (a plain struct that
// the server exports in the Prometheus text format).
//
// Thread-safety: every method locks one mutex; the engine thread records at
// most a few times per step, so contention is negligible.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/output_stream.h"
#include "kv/prefix_miss.h"

namespace tokenmill::engine {

// Fixed-bound histogram. counts[i] counts observations v with
// bounds[i-1] < v <= bounds[i] (bounds ascending); the last count is the
// overflow bucket (v > bounds.back()). Non-cumulative: Prometheus' `le`
// buckets are the running sums.
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // bounds.size() + 1
  uint64_t count = 0;
  double sum = 0;

  static Histogram with_bounds(std::vector<double> bounds);
  void observe(double value);
  // Estimate of the q-quantile (q in [0, 1]) by linear interpolation inside
  // the bucket; 0 when empty. For reports, not for exact assertions.
  double quantile(double q) const;
  double mean() const { return count ? sum / static_cast<double>(count) : 0.0; }
};

// Latency bucket bounds in milliseconds: 1 ms .. 60 s, roughly x2 apart.
std::vector<double> latency_bounds_ms();
// Per-token latency bounds in milliseconds: 0.5 ms .. 10 s.
std::vector<double> token_latency_bounds_ms();
// Accepted draft lengths: one bucket per count, 0 .. spec::kMaxDraft.
std::vector<double> accepted_length_bounds();

struct StepStats {
  int64_t num_seqs = 0;
  int64_t prefill_tokens = 0;  // prompt (or recomputed) tokens run this step
  int64_t decode_tokens = 0;   // one per decoding sequence
  int64_t sampled_tokens = 0;  // tokens sampled (EOS included; one per finished prefill or decode)
  double step_ms = 0;
  // Speculative decoding: draft tokens verified this step (also computed,
  // besides decode_tokens), and of those the ones the target accepted.
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
  double draft_ms = 0;  // drafting (proposers, draft passes), part of step_ms
  // The step's phases (docs/parallel.md): the forward pass (forward_ms, of
  // which forward_comm_ms in collectives), sampling and stop checks, and
  // the collectives of the whole step (draft passes included) with their
  // bytes and count. Zero communication with one process.
  double forward_ms = 0;
  double forward_comm_ms = 0;
  double sampling_ms = 0;
  double comm_ms = 0;
  int64_t comm_bytes = 0;
  int64_t comm_syncs = 0;
  // Mixture-of-experts models (empty otherwise): the forward pass's tokens
  // per expert summed over the layers, and its load imbalance
  // (expert_imbalance()).
  std::vector<int64_t> expert_tokens;
  double expert_imbalance = 0;
};

// Load imbalance of one forward pass of a mixture-of-experts model, from
// its per-layer counts [layers, n_expert] (Model::expert_load): in each
// layer the busiest expert's tokens over the mean per expert, averaged
// over the layers. 1 when every expert gets as many tokens; n_expert /
// n_expert_used when every token picks the same experts; 0 without tokens.
double expert_imbalance(std::span<const int64_t> per_layer, int64_t n_expert);

// The phases one engine step's time is split into; they add up to step_ms.
// schedule: scheduling, commit and emitting (the rest); drafting: proposing
// and draft passes, less their collectives; compute: the forward pass less
// its collectives; communication: every collective of the step; sampling.
enum class StepPhase { kSchedule, kDrafting, kCompute, kCommunication, kSampling };
inline constexpr int kNumStepPhases = 5;
const char* step_phase_name(StepPhase phase);
// A step with any prompt (or recomputed) tokens is a prefill step.
enum class StepKind { kPrefill, kDecode };
inline constexpr int kNumStepKinds = 2;
const char* step_kind_name(StepKind kind);
// The step's phase times in milliseconds, indexed by StepPhase.
std::array<double, kNumStepPhases> step_phase_ms(const StepStats& step);

// Prefix-cache outcome of one tenant's (or one adapter's) prompts: every
// prompt token of an admitted request is a hit or a miss with its reason
// (kv/prefix_miss.h), counted once, at its first admission.
struct PrefixStats {
  std::string label;  // the tenant or adapter; kOtherTenants beyond kMaxTenantLabels
  uint64_t hit_tokens = 0;
  std::array<uint64_t, kv::kNumPrefixMissReasons> miss_tokens{};  // by kv::PrefixMissReason
};
// Bounded label cardinality: the first 64 distinct tenants (adapters) seen
// get their own entry, the rest share "_other".
inline constexpr size_t kMaxTenantLabels = 64;
inline constexpr std::string_view kOtherTenants = "_other";

// What SLO-aware admission forecasts per request (slo_admission.h).
enum class SloMetric { kTtft, kTpot };
inline constexpr int kNumSloMetrics = 2;
const char* slo_metric_name(SloMetric metric);  // "ttft", "tpot"

// The forecast's error on the admitted requests that completed.
struct SloPredictionStats {
  uint64_t count = 0;
  double error_seconds_sum = 0;      // actual - forecast (> 0: the forecast was optimistic)
  double abs_error_seconds_sum = 0;  // |actual - forecast|
  Histogram ratio;                   // actual / forecast
};
// Bounds of SloPredictionStats::ratio: 0.25 .. 4.
std::vector<double> prediction_ratio_bounds();

struct MetricsSnapshot {
  // Counters (since start).
  uint64_t requests_submitted = 0;
  std::array<uint64_t, kNumFinishReasons> requests_finished{};  // by FinishReason
  std::array<uint64_t, kNumRejectReasons> requests_rejected{};  // by RejectReason
  uint64_t prompt_tokens = 0;                                   // of finished requests
  uint64_t cached_prompt_tokens = 0;                            // of those, served by the prefix cache
  uint64_t generated_tokens = 0;  // tokens sampled, EOS included (sum of completion_tokens)
  // Embedding requests that returned their vector, and their prompt tokens.
  uint64_t embedding_requests = 0;
  uint64_t embedding_tokens = 0;
  uint64_t steps = 0;
  // Speculative decoding: draft tokens verified and accepted (acceptance
  // rate = accepted / draft, docs/serving.md).
  uint64_t spec_draft_tokens = 0;
  uint64_t spec_accepted_tokens = 0;
  double spec_draft_seconds = 0;  // drafting time, part of step_seconds
  // Adaptive k's fitted step cost (spec/cost_model.h), 0 before any fit:
  // a decode step of T tokens costs fixed + per_token * T ms; a draft token
  // costs draft_per_token ms to propose.
  double spec_step_fixed_ms = 0;
  double spec_step_per_token_ms = 0;
  double spec_draft_ms_per_token = 0;
  // SLO-aware admission's step-cost model (sched/step_cost_model.h), 0
  // without targets: a step of D decodes and P prefill tokens costs
  // fixed + per_decode D + per_prefill_token P ms.
  double slo_step_fixed_ms = 0;
  double slo_step_per_decode_ms = 0;
  double slo_step_per_prefill_token_ms = 0;
  std::array<SloPredictionStats, kNumSloMetrics> slo_prediction;  // by SloMetric
  uint64_t prefill_tokens = 0;                                    // summed over steps (recomputation included)
  uint64_t decode_tokens = 0;
  double step_seconds = 0;
  uint64_t preemptions = 0;
  uint64_t kv_evicted_tokens = 0;         // positions a KV policy evicted (kv/kv_policy.h)
  uint64_t prefix_cache_lookups = 0;      // admissions that consulted the cache
  uint64_t prefix_cache_hit_tokens = 0;   // prompt tokens served from it
  uint64_t prefix_cache_miss_tokens = 0;  // prompt tokens of those lookups computed
  uint64_t prefix_cache_evictions = 0;
  // By tenant (first-seen order, at most kMaxTenantLabels + 1 entries).
  std::vector<PrefixStats> prefix_by_tenant;
  // By LoRA adapter name ("" = the base model), the same way.
  std::vector<PrefixStats> prefix_by_adapter;
  // Prefill time the hits saved: each admission's hit tokens times the
  // prefill cost per token at that moment (prefill_seconds_per_token).
  double prefix_cache_saved_prefill_seconds = 0;
  // Online estimate of a prefill token's cost: an exponential moving
  // average (weight 1/8) over steps with prefill tokens of the forward
  // pass's seconds per token computed; 0 before the first such step.
  double prefill_seconds_per_token = 0;
  uint64_t cow_copies = 0;  // KV blocks copied on write
  // Step time by kind and phase (seconds), steps by kind, and the root's
  // collectives (bytes moved, operations).
  std::array<std::array<double, kNumStepPhases>, kNumStepKinds> step_phase_seconds{};
  std::array<uint64_t, kNumStepKinds> steps_by_kind{};
  uint64_t comm_bytes = 0;
  uint64_t comm_syncs = 0;
  // Mixture of experts: tokens each expert ran (summed over the layers of
  // this rank), and the imbalance summed over the steps that ran experts.
  std::vector<uint64_t> expert_tokens;
  double expert_imbalance_sum = 0;
  uint64_t expert_steps = 0;
  int parallel_tp = 1;  // the model's layout over ranks (1 x 1: one process)
  int parallel_pp = 1;
  int parallel_ep = 1;  // expert-parallel ranks (the stage's ranks; 1: none)

  // Gauges (as of the last step).
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t paused = 0;          // requests held by set_paused (running or waiting)
  int64_t free_seq_slots = 0;  // max_seqs minus running slots: arrivals beyond
                               // max_waiting + this are refused (kQueueFull)
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;       // referenced by a live sequence
  int64_t kv_blocks_free = 0;       // on the free list
  int64_t kv_blocks_evictable = 0;  // held only by the prefix cache
  int64_t kv_blocks_high_water = 0;
  int64_t kv_window_blocks_total = 0;  // the sliding-window pool (0 with one pool)
  int64_t kv_window_blocks_used = 0;
  int64_t prefix_cache_blocks = 0;  // blocks indexed (referenced or evictable)
  StepStats last_step;

  // KV cache layout, fixed when the engine starts (empty / 0 before).
  std::string kv_dtype;            // "f16", "q8_0", ... (kv::kv_dtype_name)
  int64_t kv_bytes_per_token = 0;  // K and V of one position, all layers, scales included
  int64_t kv_bytes_total = 0;      // the whole pool

  Histogram queue_ms;
  Histogram ttft_ms;
  Histogram tpot_ms;
  Histogram itl_ms;  // every gap between consecutive tokens of a request
  Histogram e2e_ms;
  Histogram step_ms;
  Histogram spec_accepted_length;  // draft tokens accepted per verified draft (0..spec::kMaxDraft)

  uint64_t requests_finished_total() const;
  uint64_t requests_rejected_total() const;
};

// The scheduler's side of the picture, sampled after each step. Counters
// here are cumulative (the snapshot takes them as they are).
struct SchedulerGauges {
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t paused = 0;
  int64_t free_seq_slots = 0;
  int64_t kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_free = 0, kv_blocks_evictable = 0;
  int64_t kv_blocks_high_water = 0;
  int64_t kv_window_blocks_total = 0, kv_window_blocks_used = 0;
  int64_t prefix_cache_blocks = 0;
  uint64_t preemptions = 0;
  uint64_t kv_evicted_tokens = 0;
  uint64_t prefix_cache_lookups = 0, prefix_cache_hit_tokens = 0, prefix_cache_miss_tokens = 0;
  uint64_t prefix_cache_evictions = 0;
};

class Metrics {
 public:
  Metrics();

  void on_submit();
  void on_reject(RejectReason reason);
  // A finished request (rejections included: they also end a stream).
  void on_finish(const FinalEvent& final);
  void on_token_gap(double ms);  // inter-token latency of one request
  void on_step(const StepStats& step);
  // One verified draft and how many of its tokens the target accepted.
  void on_spec_verified(int64_t accepted);
  void set_spec_cost(double fixed_ms, double per_token_ms, double draft_ms_per_token);
  void set_slo_step_cost(double fixed_ms, double per_decode_ms, double per_prefill_token_ms);
  // An admitted request that completed: what the SLO forecast said and what
  // it got (ms).
  void on_slo_prediction(SloMetric metric, double forecast_ms, double actual_ms);
  void on_cow_copies(uint64_t n);
  // A request's first admission: its prompt tokens served by the prefix
  // cache and those missed, by reason; counted for its tenant and its
  // adapter ("" = none).
  void on_prefix_lookup(std::string_view tenant, std::string_view adapter, int64_t hit_tokens,
                        const kv::PrefixMissCounts& miss_tokens);
  void set_scheduler_gauges(const SchedulerGauges& g);
  // Called once by a sharded engine (model/parallel.h).
  void set_parallel_layout(int tp, int pp, int ep = 1);
  // Called once by the engine when it has allocated the KV pool.
  void set_kv_layout(std::string_view dtype, int64_t bytes_per_token, int64_t total_bytes);

  MetricsSnapshot snapshot() const;

  // Zeroes what counts requests, tokens and steps (and their histograms),
  // keeping the layouts, the gauges and the fitted cost models: the engine
  // calls it after its start-up calibration (slo_calibration.h). The
  // scheduler's own cumulative counters (preemptions, prefix lookups)
  // come with its next gauges and are not reset.
  void reset_counts();

 private:
  // The tenant's entry in s_.prefix_by_tenant (or "_other"'s), made on first use.
  static PrefixStats& labelled_prefix_stats(std::vector<PrefixStats>& all, std::string_view label);

  mutable std::mutex mutex_;
  MetricsSnapshot s_;
};

}  // namespace tokenmill::engine
