#include "engine/request_limits.h"

#include <fmt/format.h>

#include <algorithm>

#include "spec/ngram_proposer.h"
#include "util/error.h"

namespace tokenmill::engine {
namespace {

std::optional<Refusal> invalid(std::string message) { return Refusal{RejectReason::kInvalid, std::move(message)}; }

std::optional<Refusal> check_fields(const GenerateRequest& r, const RequestLimits& limits) {
  const int64_t max_n = std::min<int64_t>(kMaxSamples, limits.capacity.max_seqs);
  if (r.n < 1 || r.n > max_n)
    return invalid(fmt::format("n = {}: parallel samples must be in [1, {}] (at most max_seqs)", r.n, max_n));
  if (r.prompt.empty()) return invalid("the prompt is empty");
  for (int32_t t : r.prompt) {
    if (t < 0 || t >= limits.n_vocab)
      return invalid(fmt::format("prompt token id {} is outside the vocabulary [0, {})", t, limits.n_vocab));
  }
  if (r.prompt_logprobs < -1 || r.prompt_logprobs > kMaxTopLogprobs)
    return invalid(fmt::format("prompt_logprobs must be in [-1, {}], got {}", kMaxTopLogprobs, r.prompt_logprobs));
  if (r.embedding) {
    if (!limits.embeddings) return invalid("embeddings are not available with pipeline parallelism");
    if (r.max_tokens != 0 || r.n != 1 || r.prompt_logprobs != -1)
      return invalid("an embedding request takes max_tokens 0, n 1 and no prompt_logprobs");
  } else if (r.max_tokens < 1 && !(r.max_tokens == 0 && r.prompt_logprobs >= 0)) {
    return invalid(fmt::format("max_tokens must be at least 1 (0 only with prompt_logprobs), got {}", r.max_tokens));
  }
  if (r.top_logprobs < 0 || r.top_logprobs > kMaxTopLogprobs)
    return invalid(fmt::format("top_logprobs must be in [0, {}], got {}", kMaxTopLogprobs, r.top_logprobs));
  const int priority = static_cast<int>(r.priority);
  if (priority < 0 || priority > static_cast<int>(Priority::kLow))
    return invalid(fmt::format("unknown priority class {}", priority));
  if (r.timeout && r.timeout->count() < 0) return invalid("the timeout is negative");
  if (r.spec_max_draft < -1 || r.spec_max_draft > spec::kMaxDraft)
    return invalid(fmt::format("spec_max_draft must be in [-1, {}], got {}", spec::kMaxDraft, r.spec_max_draft));
  if (!r.sampling.stop.empty() && !limits.has_tokenizer) return invalid("stop strings need a model with a tokenizer");
  if (r.kv_policy) {
    const kv::KvPolicy& p = *r.kv_policy;
    try {
      p.validate();
    } catch (const Error& e) {
      return invalid(e.what());
    }
    if (p.evicts() && limits.speculation)
      return invalid(
          fmt::format("kv_policy {} does not combine with this server's speculative decoding", p.describe()));
    if (limits.parallel && (p.needs_attention_mass() || (p.evicts() && p.positions == kv::KvPositions::kRerotate)))
      return invalid(
          fmt::format("kv_policy {} does not combine with this server's tensor or pipeline parallelism", p.describe()));
  }
  try {
    r.sampling.validate(limits.n_vocab);
  } catch (const Error& e) {
    return invalid(e.what());
  }
  return std::nullopt;
}

}  // namespace

std::optional<Refusal> check_request(const GenerateRequest& r, const RequestLimits& limits) {
  if (std::optional<Refusal> bad = check_fields(r, limits)) return bad;
  // max_tokens 0 still runs as one (discarded) sampled token.
  sched::CapacityLimits capacity = limits.capacity;
  if (r.kv_policy) capacity.kv_policy = *r.kv_policy;
  return sched::never_fits(capacity, static_cast<int64_t>(r.prompt.size()), std::max<int64_t>(r.max_tokens, 1), r.n);
}

}  // namespace tokenmill::engine
