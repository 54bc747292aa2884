#include "sched/request_outcome.h"

namespace tokenmill::sched {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kTimeout: return "timeout";
    case FinishReason::kRejected: return "rejected";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

std::string_view reject_reason_name(RejectReason reason) {
  switch (reason) {
    case RejectReason::kNone: return "none";
    case RejectReason::kInvalid: return "invalid";
    case RejectReason::kPromptTooLong: return "prompt_too_long";
    case RejectReason::kContextExceeded: return "context_exceeded";
    case RejectReason::kKvNeverFits: return "kv_never_fits";
    case RejectReason::kQueueFull: return "queue_full";
    case RejectReason::kKvExhausted: return "kv_exhausted";
    case RejectReason::kDeadlineExpired: return "deadline_expired";
    case RejectReason::kShuttingDown: return "shutting_down";
    case RejectReason::kSloUnattainable: return "slo_unattainable";
  }
  return "unknown";
}

bool is_transient(RejectReason reason) {
  return reason == RejectReason::kQueueFull || reason == RejectReason::kKvExhausted ||
         reason == RejectReason::kDeadlineExpired || reason == RejectReason::kShuttingDown ||
         reason == RejectReason::kSloUnattainable;
}

}  // namespace tokenmill::sched
