#include "sched/sequence.h"

#include "util/check.h"

namespace tokenmill::sched {

int32_t SequenceData::token_at(int64_t i) const {
  TM_DCHECK(i >= 0 && i < num_tokens());
  const int64_t np = num_prompt_tokens();
  return i < np ? prompt[static_cast<size_t>(i)] : output[static_cast<size_t>(i - np)];
}

std::vector<int32_t> SequenceData::tokens(int64_t start, int64_t n) const {
  TM_CHECK(start >= 0 && n >= 0 && start + n <= num_tokens());
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = start; i < start + n; ++i) out.push_back(token_at(i));
  return out;
}

std::vector<int32_t> SequenceData::all_tokens() const { return tokens(0, num_tokens()); }

const kv::KvPolicy& SequenceData::policy() const {
  static const kv::KvPolicy kFull{};
  return kv_policy ? *kv_policy : kFull;
}

}  // namespace tokenmill::sched
