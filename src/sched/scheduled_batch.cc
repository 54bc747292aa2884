#include "sched/scheduled_batch.h"

#include "util/check.h"

namespace tokenmill::sched {

std::vector<int32_t> ScheduledSeq::tokens() const {
  TM_CHECK(num_draft >= 0 && num_draft <= static_cast<int64_t>(seq->draft.size()) && num_draft < num_tokens);
  std::vector<int32_t> out = seq->tokens(start_pos, num_tokens - num_draft);
  out.insert(out.end(), seq->draft.begin(), seq->draft.begin() + num_draft);
  return out;
}

}  // namespace tokenmill::sched
