#include "sched/sequence.h"

#include "util/check.h"

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
  }
  return "unknown";
}

int32_t Sequence::token_at(int64_t i) const {
  TM_DCHECK(i >= 0 && i < num_tokens());
  const int64_t np = num_prompt_tokens();
  return i < np ? prompt[static_cast<size_t>(i)] : output[static_cast<size_t>(i - np)];
}

std::vector<int32_t> Sequence::tokens(int64_t start, int64_t n) const {
  TM_CHECK(start >= 0 && n >= 0 && start + n <= num_tokens());
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = start; i < start + n; ++i) out.push_back(token_at(i));
  return out;
}

std::vector<int32_t> Sequence::all_tokens() const { return tokens(0, num_tokens()); }

}  // namespace tokenmill::sched
