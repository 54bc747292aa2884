#include "sched/slo_forecast.h"

#include <algorithm>

namespace tokenmill::sched {
namespace {

struct SimSeq {
  int64_t prefill_left = 0;
  int64_t output_left = 0;
  bool admitted = false;
  bool done = false;
};

// The prefill tokens a sequence runs in a step with `budget` tokens left
// (scheduler.h POLICY): at most prefill_chunk; with chunking off the whole
// remaining prefill or nothing, unless it could never fit one step.
int64_t chunk_for(int64_t left, int64_t budget, const ForecastLimits& limits) {
  if (limits.prefill_chunk > 0) return std::min({left, limits.prefill_chunk, budget});
  if (left <= budget) return left;
  return left > limits.max_batch_tokens ? budget : 0;
}

}  // namespace

std::vector<SeqForecast> forecast(std::span<const ForecastSeq> seqs, const ForecastLimits& limits,
                                  const StepCostModel& cost, double horizon_ms) {
  const size_t n = seqs.size();
  std::vector<SeqForecast> out(n);
  std::vector<SimSeq> sim(n);
  int64_t slots_used = 0;
  size_t next_waiting = n;  // the first sequence not admitted yet
  for (size_t i = 0; i < n; ++i) {
    sim[i] = {seqs[i].prefill_left, std::max<int64_t>(seqs[i].output_left, 1), seqs[i].running, false};
    if (seqs[i].running) {
      slots_used += seqs[i].slots;
      if (seqs[i].prefill_left == 0) out[i].first_token_ms = 0.0;
    } else if (next_waiting == n) {
      next_waiting = i;
    }
  }
  std::vector<int64_t> chunk(n, 0);
  double t = 0.0;
  while (t <= horizon_ms) {
    int64_t decode_rows = 0;
    int64_t min_output_left = INT64_MAX;
    bool prefill_pending = false;
    for (size_t i = 0; i < next_waiting; ++i) {
      if (!sim[i].admitted || sim[i].done) continue;
      if (sim[i].prefill_left == 0) {
        decode_rows += seqs[i].slots;
        min_output_left = std::min(min_output_left, sim[i].output_left);
      } else {
        prefill_pending = true;
      }
    }
    int64_t budget = std::max<int64_t>(0, limits.max_batch_tokens - decode_rows);
    int64_t prefill = 0;
    std::fill(chunk.begin(), chunk.end(), 0);
    for (size_t i = 0; i < next_waiting && budget > 0; ++i) {
      if (!sim[i].admitted || sim[i].done || sim[i].prefill_left == 0) continue;
      chunk[i] = chunk_for(sim[i].prefill_left, budget, limits);
      budget -= chunk[i];
      prefill += chunk[i];
    }
    while (next_waiting < n && budget > 0 && slots_used + seqs[next_waiting].slots <= limits.max_seqs) {
      const size_t i = next_waiting;
      const int64_t c = chunk_for(sim[i].prefill_left, budget, limits);
      if (c == 0) break;
      sim[i].admitted = true;
      slots_used += seqs[i].slots;
      chunk[i] = c;
      budget -= c;
      prefill += c;
      prefill_pending = true;
      ++next_waiting;
    }
    if (decode_rows == 0 && prefill == 0) break;  // nothing left that can run
    const double step = std::max(cost.step_ms(decode_rows, prefill), 1e-3);
    // Decode-only steps repeat unchanged until the next sequence finishes
    // (nothing waits that could start: the head lacks slots): one stride.
    // Not beyond the horizon: what happens after it stays unknown.
    int64_t stride = prefill_pending || prefill > 0 ? 1 : min_output_left;
    if (t + step * static_cast<double>(stride) > horizon_ms)
      stride = std::min(stride, static_cast<int64_t>((horizon_ms - t) / step) + 1);
    t += step * static_cast<double>(stride);
    for (size_t i = 0; i < next_waiting; ++i) {
      SimSeq& s = sim[i];
      if (!s.admitted || s.done) continue;
      if (chunk[i] > 0) {
        s.prefill_left -= chunk[i];
        if (s.prefill_left > 0) continue;
        out[i].first_token_ms = t;
        s.output_left -= 1;
      } else if (s.prefill_left == 0) {
        s.output_left -= stride;
      } else {
        continue;  // a prefill that got no budget this step
      }
      if (s.output_left <= 0) {
        s.done = true;
        out[i].last_token_ms = t;
        slots_used -= seqs[i].slots;
      }
    }
  }
  return out;
}

}  // namespace tokenmill::sched
