// What a client asks the engine for: a tokenized prompt and how to continue
// it. Plain data; Engine::submit validates it (invalid fields end the stream
// at once with FinishReason::kRejected / RejectReason::kInvalid).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/embedding_pool.h"
#include "grammar/compiled_grammar.h"
#include "kv/kv_policy.h"
#include "model/lora_adapter.h"
#include "sample/sampling_params.h"

namespace tokenmill::engine {

// Scheduling class. Within the running batch higher classes are admitted
// first and preempted last; aging (EngineConfig) lifts long waiters.
enum class Priority { kHigh = 0, kNormal = 1, kLow = 2 };

// Most parallel samples per request (GenerateRequest::n).
inline constexpr int kMaxSamples = 64;

// Most top-logprobs a request may ask for (OpenAI allows 20).
inline constexpr int kMaxTopLogprobs = 20;

struct GenerateRequest {
  std::vector<int32_t> prompt;  // token ids, BOS included if the model wants one
  sample::SamplingParams sampling;
  // Completion tokens at most: >= 1, or 0 together with prompt_logprobs
  // (score the prompt, generate nothing; finishes with kLength).
  int64_t max_tokens = 128;
  Priority priority = Priority::kNormal;
  std::string tenant;  // isolation domain of the prefix cache (EngineConfig::prefix_isolation)
  // A LoRA adapter loaded for the engine's model (model/lora_adapter.h),
  // applied to every forward pass of this request; null: the base model.
  // Requests with different adapters share a batch; their prefix-cache
  // blocks never mix (the adapter's identity is part of the namespace).
  // Held until the request finishes, so an adapter unloaded meanwhile
  // stays alive for it.
  std::shared_ptr<const model::LoraAdapter> adapter;
  // The request ends with FinishReason::kTimeout when it has not finished
  // this long after submit (queueing included).
  std::optional<std::chrono::milliseconds> timeout;
  // Parallel samples of one prompt, in [1, min(kMaxSamples, max_seqs)]
  // (Engine::submit_samples; submit() takes n == 1 only). The prompt is
  // prefilled once, then the scheduler forks the sequence into n that share
  // its KV blocks copy-on-write. Sample k samples with seed sampling.seed + k
  // (so results are reproducible); each has its own stop checks and stream.
  int n = 1;
  bool logprobs = false;  // report the chosen token's log-probability
  int top_logprobs = 0;   // and this many alternatives, in [0, kMaxTopLogprobs]
  // >= 0: also report every prompt token's log-probability given the tokens
  // before it, with this many alternatives (FinalEvent::prompt_logprobs);
  // in [-1, kMaxTopLogprobs], -1 = off. Prefill then computes a logits row
  // for every prompt position (LogitRows::kAll: n_vocab floats each), and
  // the request skips the prefix-cache lookup, since a hit would leave
  // positions uncomputed.
  int prompt_logprobs = -1;
  // Speculative decoding (EngineConfig::spec): -1 drafts up to the engine's
  // k, 0 turns it off for this request, n > 0 drafts at most min(n, k).
  int spec_max_draft = -1;
  // This request's long-context KV policy (kv/kv_policy.h); unset: the
  // engine's (EngineConfig::kv_policy). An evicting one is refused with
  // speculative decoding and, for h2o and re-rotation, with a parallel model.
  std::optional<kv::KvPolicy> kv_policy;
  // Constrained decoding: when set, every sampled token (and every accepted
  // draft token) keeps the output a prefix of a sentence of this grammar,
  // and an end-of-generation token is allowed only where the sentence is
  // complete. Compiled by the caller (grammar::GrammarCompiler), off the
  // engine thread; shared by the request's samples.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  // An embedding request: the prompt is prefilled through the normal
  // batches, nothing is generated, and the final event carries the prompt's
  // final hidden states pooled this way, L2-normalised
  // (FinalEvent::embedding; embedding_pool.h). Requires max_tokens 0, n 1
  // and no prompt_logprobs; finishes with kLength. Mean pooling needs every
  // position's state, so it skips the prefix-cache lookup (as
  // prompt_logprobs does); last pooling takes hits (the last position is
  // never served from the cache).
  std::optional<Pooling> embedding;
};

}  // namespace tokenmill::engine
