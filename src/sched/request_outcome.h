// How a request ends, and why it was refused: one enum family shared by the
// scheduler (Sequence::finish_reason), the engine (FinalEvent) and the
// server (HTTP status, `finish_reason`, metrics labels).
#pragma once

#include <string_view>

namespace tokenmill::sched {

enum class FinishReason {
  kNone,       // still running (never in a FinalEvent)
  kStop,       // end-of-generation token or a stop string
  kLength,     // max_tokens reached (or the model's context is full)
  kCancelled,  // cancelled by the client or engine shutdown
  kTimeout,    // the request's deadline passed
  kRejected,   // refused (see RejectReason)
  kError,      // an internal failure while running (message in the error field)
};
inline constexpr int kNumFinishReasons = 7;
std::string_view finish_reason_name(FinishReason reason);  // "none", "stop", "length", ...

// Why a request was refused. kInvalid .. kKvNeverFits can never succeed as
// sent (HTTP 400); the rest are transient overload (429 / 503, retry later).
enum class RejectReason {
  kNone,
  kInvalid,          // bad parameters (empty prompt, token ids out of range, sampling, duplicate id)
  kPromptTooLong,    // the prompt alone fills the context, or an unchunked step
  kContextExceeded,  // prompt + max_tokens exceeds the model context
  kKvNeverFits,      // prompt + max_tokens needs more KV blocks than the whole pool
  kQueueFull,        // the waiting queue is at max_waiting
  kKvExhausted,      // no KV blocks free now under the reject policy
  kDeadlineExpired,  // the request's deadline passed while it was still queued
  kShuttingDown,     // the engine is stopping or stopped
  kSloUnattainable,  // SLO-aware admission: it could not get its TTFT/TPOT/E2E target
};
inline constexpr int kNumRejectReasons = 10;
// "none", "invalid", "prompt_too_long", "context_exceeded", "kv_never_fits",
// "queue_full", "kv_exhausted", "deadline_expired", "shutting_down",
// "slo_unattainable": the
// `reason` label of tokenmill_requests_rejected_total.
std::string_view reject_reason_name(RejectReason reason);
// True for the reasons that may succeed when retried later.
bool is_transient(RejectReason reason);

}  // namespace tokenmill::sched
