// What a client asks the engine for: a tokenized prompt and how to continue
// it. Plain data; Engine::submit validates it (invalid fields end the stream
// at once with FinishReason::kRejected / RejectReason::kInvalid).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sample/sampling_params.h"

namespace tokenmill::engine {

// Scheduling class. Within the running batch higher classes are admitted
// first and preempted last; aging (EngineConfig) lifts long waiters.
enum class Priority { kHigh = 0, kNormal = 1, kLow = 2 };

// Most top-logprobs a request may ask for (OpenAI allows 20).
inline constexpr int kMaxTopLogprobs = 20;

struct GenerateRequest {
  std::vector<int32_t> prompt;  // token ids, BOS included if the model wants one
  sample::SamplingParams sampling;
  int64_t max_tokens = 128;  // completion tokens at most (>= 1)
  Priority priority = Priority::kNormal;
  std::string tenant;  // isolation domain of the prefix cache (EngineConfig::prefix_isolation)
  // The request ends with FinishReason::kTimeout when it has not finished
  // this long after submit (queueing included).
  std::optional<std::chrono::milliseconds> timeout;
  // Parallel samples of one prompt. Only 1 is supported for now: the
  // scheduler does not fork sequences yet (n > 1 is rejected as invalid).
  int n = 1;
  bool logprobs = false;  // report the chosen token's log-probability
  int top_logprobs = 0;   // and this many alternatives, in [0, kMaxTopLogprobs]
};

}  // namespace tokenmill::engine
