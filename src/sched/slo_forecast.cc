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

// What one simulated step runs.
struct ForecastStep {
  int64_t decode_rows = 0;
  int64_t min_output_left = INT64_MAX;  // of the decoding sequences
  bool prefill_pending = false;         // some admitted sequence is still prefilling
  int64_t prefill = 0;                  // prefill tokens this step
};

// The prefill tokens a sequence runs in a step with `budget` tokens left
// (scheduler.h POLICY): at most prefill_chunk; with chunking off the whole
// remaining prefill or nothing, unless it could never fit one step.
int64_t chunk_for(int64_t left, int64_t budget, const ForecastLimits& limits) {
  if (limits.prefill_chunk > 0) return std::min({left, limits.prefill_chunk, budget});
  if (left <= budget) return left;
  return left > limits.max_batch_tokens ? budget : 0;
}

// The scheduler's policy replayed over the queue, one planned step at a
// time: forecast()'s state.
class ForecastReplay {
 public:
  ForecastReplay(std::span<const ForecastSeq> seqs, const ForecastLimits& limits)
      : seqs_(seqs), limits_(limits), out_(seqs.size()), sim_(seqs.size()), chunk_(seqs.size(), 0) {
    next_waiting_ = seqs.size();
    for (size_t i = 0; i < seqs.size(); ++i) {
      sim_[i] = {seqs[i].prefill_left, std::max<int64_t>(seqs[i].output_left, 1), seqs[i].running, false};
      if (seqs[i].running) {
        slots_used_ += seqs[i].slots;
        if (seqs[i].prefill_left == 0) out_[i].first_token_ms = 0.0;
      } else if (next_waiting_ == seqs.size()) {
        next_waiting_ = i;
      }
    }
  }

  // The next step: decode rows, then the running sequences' prefill
  // chunks, then the waiting sequences admitted into what is left.
  ForecastStep plan() {
    ForecastStep step;
    for (size_t i = 0; i < next_waiting_; ++i) {
      if (!sim_[i].admitted || sim_[i].done) continue;
      if (sim_[i].prefill_left == 0) {
        step.decode_rows += seqs_[i].slots;
        step.min_output_left = std::min(step.min_output_left, sim_[i].output_left);
      } else {
        step.prefill_pending = true;
      }
    }
    int64_t budget = std::max<int64_t>(0, limits_.max_batch_tokens - step.decode_rows);
    std::fill(chunk_.begin(), chunk_.end(), 0);
    for (size_t i = 0; i < next_waiting_ && budget > 0; ++i) {
      if (!sim_[i].admitted || sim_[i].done || sim_[i].prefill_left == 0) continue;
      chunk_[i] = chunk_for(sim_[i].prefill_left, budget, limits_);
      budget -= chunk_[i];
      step.prefill += chunk_[i];
    }
    admit_waiting(step, budget);
    return step;
  }

  // The planned step ran `stride` times (decode-only steps repeat) and
  // ended at time t.
  void finish(int64_t stride, double t) {
    for (size_t i = 0; i < next_waiting_; ++i) {
      SimSeq& s = sim_[i];
      if (!s.admitted || s.done) continue;
      if (chunk_[i] > 0) {
        s.prefill_left -= chunk_[i];
        if (s.prefill_left > 0) continue;
        out_[i].first_token_ms = t;
        s.output_left -= 1;
      } else if (s.prefill_left == 0) {
        s.output_left -= stride;
      } else {
        continue;  // a prefill that got no budget this step
      }
      if (s.output_left <= 0) {
        s.done = true;
        out_[i].last_token_ms = t;
        slots_used_ -= seqs_[i].slots;
      }
    }
  }

  std::vector<SeqForecast> take() { return std::move(out_); }

 private:
  // Waiting sequences in rank order while their slots are free and their
  // first chunk fits (no overtaking).
  void admit_waiting(ForecastStep& step, int64_t& budget) {
    const size_t n = seqs_.size();
    while (next_waiting_ < n && budget > 0 && slots_used_ + seqs_[next_waiting_].slots <= limits_.max_seqs) {
      const size_t i = next_waiting_;
      const int64_t c = chunk_for(sim_[i].prefill_left, budget, limits_);
      if (c == 0) break;
      sim_[i].admitted = true;
      slots_used_ += seqs_[i].slots;
      chunk_[i] = c;
      budget -= c;
      step.prefill += c;
      step.prefill_pending = true;
      ++next_waiting_;
    }
  }

  std::span<const ForecastSeq> seqs_;
  const ForecastLimits& limits_;
  std::vector<SeqForecast> out_;
  std::vector<SimSeq> sim_;
  std::vector<int64_t> chunk_;  // each sequence's prefill tokens in the planned step
  int64_t slots_used_ = 0;
  size_t next_waiting_ = 0;  // the first sequence not admitted yet
};

}  // namespace

std::vector<SeqForecast> forecast(std::span<const ForecastSeq> seqs, const ForecastLimits& limits,
                                  const StepCostModel& cost, double horizon_ms) {
  ForecastReplay replay(seqs, limits);
  double t = 0.0;
  while (t <= horizon_ms) {
    const ForecastStep step = replay.plan();
    if (step.decode_rows == 0 && step.prefill == 0) break;  // nothing left that can run
    const double step_ms = std::max(cost.step_ms(step.decode_rows, step.prefill), 1e-3);
    // Decode-only steps repeat unchanged until the next sequence finishes
    // (nothing waits that could start: the head lacks slots): one stride.
    // Not beyond the horizon: what happens after it stays unknown.
    int64_t stride = step.prefill_pending || step.prefill > 0 ? 1 : step.min_output_left;
    if (t + step_ms * static_cast<double>(stride) > horizon_ms)
      stride = std::min(stride, static_cast<int64_t>((horizon_ms - t) / step_ms) + 1);
    t += step_ms * static_cast<double>(stride);
    replay.finish(stride, t);
  }
  return replay.take();
}

}  // namespace tokenmill::sched
