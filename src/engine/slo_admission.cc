#include "engine/slo_admission.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "util/clock.h"

namespace tokenmill::engine {
namespace {

// Retry-After seconds for a wait of `ms`: whole seconds, 1 .. 60.
double retry_seconds(double ms) {
  if (!std::isfinite(ms)) return 60.0;
  return std::clamp(std::ceil(ms / 1e3), 1.0, 60.0);
}

}  // namespace

SloAdmission::SloAdmission(const SloTargets& targets, const sched::ForecastLimits& limits, Metrics& metrics)
    : targets_(targets), limits_(limits), metrics_(metrics) {
  targets_.validate();
}

void SloAdmission::observe_step(const StepStats& step) {
  cost_.observe(step.decode_tokens + step.draft_tokens, step.prefill_tokens, step.step_ms);
  metrics_.set_slo_step_cost(cost_.fixed_ms(), cost_.per_decode_ms(), cost_.per_prefill_token_ms());
}

int64_t SloAdmission::expected_output(const sched::Sequence& seq) const {
  const auto share = static_cast<int64_t>(std::ceil(output_share_ * static_cast<double>(seq.max_tokens)));
  return std::clamp<int64_t>(share, std::min(seq.num_output_tokens() + 1, seq.max_tokens), seq.max_tokens);
}

sched::ForecastSeq SloAdmission::forecast_seq(const sched::Sequence& seq, bool running) const {
  sched::ForecastSeq f;
  f.running = running;
  f.slots = seq.num_samples();
  f.prefill_left = running && seq.is_decoding() ? 0 : seq.num_uncomputed_tokens();
  // Not admitted yet: the prompt tokens the prefix cache held at arrival
  // will not be computed (the cache may lose them meanwhile: an estimate).
  if (!running && seq.num_computed_tokens == 0) {
    const auto it = cached_tokens_.find(seq.id);
    if (it != cached_tokens_.end()) f.prefill_left = std::max<int64_t>(1, f.prefill_left - it->second);
  }
  f.output_left = std::max<int64_t>(1, expected_output(seq) - seq.num_output_tokens());
  return f;
}

SloAdmission::Outlook SloAdmission::outlook(const sched::Sequence& seq, const sched::SeqForecast& f,
                                            SteadyClock::time_point now) const {
  const double elapsed = ms_between(seq.arrival, now);
  Outlook o;
  o.ttft_ms = seq.first_token ? ms_between(seq.arrival, *seq.first_token) : elapsed + f.first_token_ms;
  o.e2e_ms = elapsed + f.last_token_ms;
  const int64_t total = expected_output(seq);
  o.tpot_ms = total > 1 ? (o.e2e_ms - o.ttft_ms) / static_cast<double>(total - 1) : 0.0;
  return o;
}

std::optional<std::string> SloAdmission::missed(const Outlook& o, bool check_tpot) const {
  if (targets_.ttft_ms > 0 && !(o.ttft_ms <= targets_.ttft_ms))
    return fmt::format("time to first token forecast {:.0f} ms, target {:.0f} ms", o.ttft_ms, targets_.ttft_ms);
  if (check_tpot && targets_.tpot_ms > 0 && !(o.tpot_ms <= targets_.tpot_ms))
    return fmt::format("time per output token forecast {:.1f} ms, target {:.1f} ms", o.tpot_ms, targets_.tpot_ms);
  if (targets_.e2e_ms > 0 && !(o.e2e_ms <= targets_.e2e_ms))
    return fmt::format("end-to-end latency forecast {:.0f} ms, target {:.0f} ms", o.e2e_ms, targets_.e2e_ms);
  return std::nullopt;
}

std::optional<SloRefusal> SloAdmission::check(const sched::Sequence& candidate,
                                              std::span<const sched::RankedSequence> ranked,
                                              SteadyClock::time_point now, int64_t cached_tokens) {
  if (!cost_.measured()) return std::nullopt;  // warming up: nothing to forecast with
  if (cached_tokens > 0) cached_tokens_[candidate.id] = cached_tokens;
  // A new arrival ranks after every running sequence and after the waiting
  // ones of its class or a better one (FCFS within a class).
  size_t at = ranked.size();
  for (size_t i = 0; i < ranked.size(); ++i) {
    if (!ranked[i].running && ranked[i].rank_class > candidate.priority) {
      at = i;
      break;
    }
  }
  std::vector<sched::ForecastSeq> without, with;
  for (const sched::RankedSequence& r : ranked) without.push_back(forecast_seq(*r.seq, r.running));
  with = without;
  with.insert(with.begin() + static_cast<ptrdiff_t>(at), forecast_seq(candidate, false));
  const std::vector<sched::SeqForecast> base = sched::forecast(without, limits_, cost_, kHorizonMs);
  const std::vector<sched::SeqForecast> after = sched::forecast(with, limits_, cost_, kHorizonMs);

  // When the batch first shrinks without it: a retry's earliest chance.
  double first_finish_ms = kHorizonMs;
  for (size_t i = 0; i < ranked.size(); ++i) {
    if (ranked[i].running) first_finish_ms = std::min(first_finish_ms, base[i].last_token_ms);
  }
  const auto refuse = [&](const std::string& why, double wait_ms) {
    SloRefusal r{"the latency target cannot be met now: " + why, retry_seconds(wait_ms)};
    retry_after_s_[candidate.id] = r.retry_after_s;
    cached_tokens_.erase(candidate.id);
    return r;
  };
  const Outlook own = outlook(candidate, after[at], now);
  if (std::optional<std::string> miss = missed(own, true)) {
    const bool late_first = targets_.ttft_ms > 0 && own.ttft_ms > targets_.ttft_ms;
    return refuse(*miss, late_first ? own.ttft_ms - targets_.ttft_ms : first_finish_ms);
  }
  for (size_t i = 0; i < ranked.size(); ++i) {
    const sched::RankedSequence& r = ranked[i];
    if (r.rank_class > candidate.priority) continue;            // a lower class may be pushed out
    if (missed(outlook(*r.seq, base[i], now), true)) continue;  // misses anyway
    const Outlook pushed = outlook(*r.seq, after[i < at ? i : i + 1], now);
    if (std::optional<std::string> miss = missed(pushed, true))
      return refuse(fmt::format("admitting it would push a request already admitted past its target ({})", *miss),
                    first_finish_ms);
  }
  predictions_[candidate.id] = {own.ttft_ms, own.tpot_ms};
  return std::nullopt;
}

std::vector<std::pair<uint64_t, SloRefusal>> SloAdmission::unattainable(std::span<const sched::RankedSequence> ranked,
                                                                        SteadyClock::time_point now) {
  std::vector<std::pair<uint64_t, SloRefusal>> out;
  if (!cost_.measured() || (targets_.ttft_ms <= 0 && targets_.e2e_ms <= 0)) return out;
  const bool any_queued =
      std::any_of(ranked.begin(), ranked.end(), [](const auto& r) { return !r.running && !r.seq->first_scheduled; });
  if (!any_queued) return out;
  std::vector<sched::ForecastSeq> seqs;
  for (const sched::RankedSequence& r : ranked) seqs.push_back(forecast_seq(*r.seq, r.running));
  const std::vector<sched::SeqForecast> f = sched::forecast(seqs, limits_, cost_, kHorizonMs);
  for (size_t i = 0; i < ranked.size(); ++i) {
    const sched::Sequence& seq = *ranked[i].seq;
    if (ranked[i].running || seq.first_scheduled) continue;
    const Outlook o = outlook(seq, f[i], now);
    // TPOT is not re-checked: it was when the request was admitted, and
    // the queue ahead does not change it.
    std::optional<std::string> miss = missed(o, false);
    if (!miss) continue;
    const double over = targets_.ttft_ms > 0 && o.ttft_ms > targets_.ttft_ms ? o.ttft_ms - targets_.ttft_ms
                                                                             : o.e2e_ms - targets_.e2e_ms;
    SloRefusal r{fmt::format("the latency target can no longer be met while queued: {}", *miss), retry_seconds(over)};
    retry_after_s_[seq.id] = r.retry_after_s;
    out.emplace_back(seq.id, std::move(r));
  }
  return out;
}

void SloAdmission::on_final(uint64_t id, int64_t max_tokens, FinalEvent& final) {
  const bool completed = final.reason == FinishReason::kStop || final.reason == FinishReason::kLength;
  if (completed && max_tokens > 0 && final.embedding.empty()) {
    const double used = static_cast<double>(final.usage.completion_tokens) / static_cast<double>(max_tokens);
    output_share_ = (1.0 - kShareWeight) * output_share_ + kShareWeight * std::clamp(used, 0.0, 1.0);
  }
  if (const auto it = predictions_.find(id); it != predictions_.end()) {
    if (completed && final.timings.ttft_ms > 0)
      metrics_.on_slo_prediction(SloMetric::kTtft, it->second.ttft_ms, final.timings.ttft_ms);
    if (completed && final.usage.completion_tokens > 1)
      metrics_.on_slo_prediction(SloMetric::kTpot, it->second.tpot_ms, final.timings.tpot_ms);
    predictions_.erase(it);
  }
  cached_tokens_.erase(id);
  if (const auto it = retry_after_s_.find(id); it != retry_after_s_.end()) {
    if (final.reject == RejectReason::kSloUnattainable) final.retry_after_s = it->second;
    retry_after_s_.erase(it);
  }
}

}  // namespace tokenmill::engine
