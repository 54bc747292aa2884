// The one way a generation request becomes an engine request, whatever API
// it came through. An API room parses its own request shape, tokenizes its
// prompts (check_prompt_text first) and fills a GenerationJob; prepare_job
// then applies, once for every API: truncation (truncate_prompt_tokens,
// n_keep), bad_words, prompt scoring, the max_tokens default (the room the
// context leaves, or --default-max-tokens), the min_tokens check, the
// output constraint or tool grammar, and the server's request timeout. The
// job then runs as a Generation (generation.h), answered whole or streamed
// through a StreamShape (generation_stream.h).
//
// Runs on the HTTP worker that answers the request.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/generation.h"
#include "server/generation_stream.h"
#include "server/sampling_request.h"
#include "server/tools/tool_request.h"

namespace tokenmill::server {

struct ServingContext;

struct GenerationJob {
  SamplingRequest common;
  std::string tenant;
  std::shared_ptr<const model::LoraAdapter> adapter;  // picked by `model`, or null (the base)
  std::vector<std::vector<int32_t>> prompts;          // tokenized, each non-empty
  // The completion tokens the request asks for; nullopt: as many as the
  // context leaves (a chat without max_tokens, llama.cpp's n_predict -1).
  std::optional<int64_t> asked_max_tokens;
  const ToolsRequest* tools = nullptr;  // a chat's tools: their grammar constrains the output
  int prompt_logprobs = -1;             // the API's own scoring (echo with logprobs); -1: none

  // Set by prepare_job:
  int64_t max_tokens = 0;     // 0: nothing to generate (echo only)
  std::vector<bool> trimmed;  // per prompt: shortened to fit the context
  std::shared_ptr<const grammar::CompiledGrammar> grammar;

  bool any_trimmed() const;
  // Whether the engine runs at all: an echo without logprobs and with
  // max_tokens 0 needs nothing from it.
  bool needs_engine() const { return max_tokens > 0 || prompt_logprobs >= 0; }
  // The engine request of every prompt (its prompt and n set per prompt).
  engine::GenerateRequest request() const;
};

// Whether the request asks to shorten a prompt too long for the context.
bool may_truncate(const SamplingRequest& c);

// A text longer than the context could hold, whatever its tokens are, is
// refused before it is tokenized (400 context_length_exceeded naming
// `param`): tokenizing megabytes costs a worker seconds for a request that
// must fail anyway. Skipped when the request may truncate its prompt.
void check_prompt_text(const ServingContext& ctx, const engine::Engine& engine, const SamplingRequest& c, size_t bytes,
                       const char* param);

// Everything between tokenized prompts and an engine request (see the top
// of this file). Throws ApiError for what the request gets wrong.
void prepare_job(ServingContext& ctx, const engine::Engine& engine, GenerationJob& job);

// A prepared job's whole answer: submits it and waits for every choice
// (`observe` sees each event), then records the outcome in the log record.
// nullopt when the client left meanwhile (every choice cancelled, the
// disconnect counted). Throws the ApiError of a failed choice.
std::optional<std::vector<engine::GenerationResult>> run_to_end(ServingContext& ctx, engine::Engine& engine,
                                                                const GenerationJob& job, const HttpRequest& req,
                                                                const Generation::EventObserver& observe = {});

// Submits a prepared job for a stream and waits for its first events
// (ServingContext::first_event_deadline), so that a refusal is still an
// HTTP status. Throws that refusal's ApiError.
std::unique_ptr<Generation> submit_for_stream(ServingContext& ctx, engine::Engine& engine, const GenerationJob& job);

// Answers with an SSE stream of `gen` (null: nothing to generate) in
// `shape`'s form; the stream is written later, on this worker's thread,
// by GenerationStream::run.
void respond_with_stream(ServingContext& ctx, std::unique_ptr<Generation> gen, const GenerationJob& job,
                         std::shared_ptr<StreamShape> shape, HttpResponse& res);

}  // namespace tokenmill::server
