// When will each queued and running request get its first and its last
// token? A fast-forward of the scheduler's policy (scheduler.h, POLICY)
// over the current queue, step by step, each step costed by the
// StepCostModel. The basis of SLO-aware admission: the engine forecasts
// with and without a new request to see what admitting it would do.
//
// The model of a step, as schedule() plans it: every running sequence
// whose prefill is done decodes one token per sample; the rest of
// max_batch_tokens goes to prefill chunks (at most prefill_chunk each; the
// whole remaining prefill when chunking is off), first the running
// sequences' unfinished prefills, then waiting sequences in rank order,
// each admitted when its samples' slots are free (no overtaking: when the
// head does not fit, nobody behind it starts). A sequence's first token
// comes with the step that completes its prefill; it then decodes one
// token per step until its expected output is reached, which frees its
// slots.
//
// Left out: KV blocks (the pool may hold a sequence back longer than
// forecast), preemption, speculative decoding (a draft step counts as one decode row per sample)
// and pauses (a paused sequence is forecast as if it ran).
//
// Cost: O(steps x sequences), with runs of identical decode-only steps
// taken in one stride; bounded by horizon_ms.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "sched/step_cost_model.h"

namespace tokenmill::sched {

// One sequence as the forecast sees it. Times in ms relative to now.
struct ForecastSeq {
  bool running = false;      // holds its slots (admitted); else waiting
  int64_t slots = 1;         // sequence slots (parallel samples)
  int64_t prefill_left = 0;  // tokens still to prefill (prompt, or recompute)
  int64_t output_left = 0;   // tokens still expected, first included (>= 1)
};

struct ForecastLimits {
  int64_t max_batch_tokens = 512;
  int64_t max_seqs = 64;
  int64_t prefill_chunk = 0;  // 0 = chunking off
};

struct SeqForecast {
  static constexpr double kNever = std::numeric_limits<double>::infinity();
  // When the step that yields its first token ends: 0 for a running
  // sequence whose prefill is already done (its first token is past);
  // kNever past the horizon.
  double first_token_ms = kNever;
  double last_token_ms = kNever;  // its expected last token
};

// `seqs` in rank order: the running ones, then the waiting ones in the
// order admit_waiting takes them. Returns one forecast per sequence. The
// run stops once every sequence has finished or the clock passes
// horizon_ms; what has not happened by then stays kNever.
std::vector<SeqForecast> forecast(std::span<const ForecastSeq> seqs, const ForecastLimits& limits,
                                  const StepCostModel& cost, double horizon_ms);

}  // namespace tokenmill::sched
