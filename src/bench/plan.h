// The request plan: every request of a run, decided before the first one is
// sent (lengths, prompt text, arrival offset, cancellation point), so that
// the same spec and seed give the same requests byte for byte and the
// driver does no generation work while it measures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/prompt_builder.h"
#include "bench/traffic_spec.h"

namespace tokenmill::bench {

struct PlannedRequest {
  int64_t cell = 0;           // -1: warmup
  int64_t index = 0;          // within its cell
  double scheduled_s = -1;    // offset from the cell start; < 0: when a client is free (closed loop)
  int32_t input_bucket = -1;  // index into length_buckets; -1: outside them (datasets)
  int32_t output_bucket = -1;
  int64_t input_tokens = 0;   // counted by the token counter, special tokens left out
  int64_t shared_tokens = 0;  // of those, the shared prefix
  int64_t max_tokens = 0;
  int64_t cancel_after = 0;  // disconnect after this many streamed chunks; 0: never
  std::string prompt;
};

struct CellPlan {
  int64_t concurrency = 1;
  double cache_hit_rate = 0;
  std::vector<PlannedRequest> requests;
};

struct RunPlan {
  std::vector<PlannedRequest> warmup;
  std::vector<CellPlan> cells;  // concurrency-major: for c in concurrency, for h in cache_hit_rate
};

// One line of a JSONL dataset or trace: {"prompt": "..."} or, in traces,
// {"input_tokens": N} for a synthetic prompt; optional "output_tokens"
// (alias "max_tokens") and, in traces, "timestamp" (seconds).
struct PromptRecord {
  std::string prompt;
  int64_t input_tokens = -1;
  int64_t output_tokens = -1;
  double timestamp = 0;
};

// Reads a JSONL prompt file; errors name the file and line.
std::vector<PromptRecord> read_prompt_file(const std::string& path, bool trace);

// Builds the plan. `counter` counts tokens for synthetic prompts and for
// bucketing dataset prompts. Throws Error for an unusable dataset.
RunPlan make_run_plan(const TrafficSpec& spec, const TokenCounter& counter);

// One JSON object per request, warmup first; stable across runs.
std::string plan_to_jsonl(const RunPlan& plan);

// The length bucket that holds n, or -1.
int32_t bucket_of(const std::vector<LengthRange>& buckets, int64_t n);

}  // namespace tokenmill::bench
