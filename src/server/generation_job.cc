#include "server/generation_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/prompt_tokens.h"
#include "server/request_extensions.h"
#include "server/request_log.h"
#include "server/serving_context.h"
#include "server/structured_output.h"

namespace tokenmill::server {

namespace {

// max_tokens for a request that may run to the end of the context: what
// the context (or the KV pool, or each sample's share of it) leaves after
// the longest prompt, at most --default-max-tokens when the server sets it.
int64_t context_room(const ServingContext& ctx, const engine::Engine& engine,
                     const std::vector<std::vector<int32_t>>& prompts, int n) {
  int64_t room = std::numeric_limits<int64_t>::max();
  for (const std::vector<int32_t>& p : prompts)
    room = std::min(room, engine.limits().completion_room(static_cast<int64_t>(p.size()), n));
  int64_t fallback = std::max<int64_t>(room, 1);
  if (ctx.policy.default_max_tokens > 0) fallback = std::min(fallback, ctx.policy.default_max_tokens);
  return fallback;
}

}  // namespace

bool GenerationJob::any_trimmed() const { return std::find(trimmed.begin(), trimmed.end(), true) != trimmed.end(); }

engine::GenerateRequest GenerationJob::request() const {
  engine::GenerateRequest r = engine_request(common, tenant, max_tokens, prompt_logprobs, grammar);
  r.adapter = adapter;
  return r;
}

bool may_truncate(const SamplingRequest& c) { return c.truncate_prompt_tokens || (c.n_keep && *c.n_keep >= 0); }

void check_prompt_text(const ServingContext& ctx, const engine::Engine& engine, const SamplingRequest& c, size_t bytes,
                       const char* param) {
  const int64_t max_len = engine.limits().max_model_len();
  if (may_truncate(c) || max_len <= 0 || ctx.max_token_bytes == 0) return;
  const size_t limit = static_cast<size_t>(max_len) * ctx.max_token_bytes;
  if (bytes <= limit) return;
  throw ApiError(400,
                 fmt::format("the {} is {} bytes; this model's context of {} tokens holds at most {} bytes of text",
                             param, bytes, max_len, limit),
                 "invalid_request_error", std::string(param), "context_length_exceeded");
}

void prepare_job(ServingContext& ctx, const engine::Engine& engine, GenerationJob& job) {
  SamplingRequest& c = job.common;
  std::vector<size_t> sizes;
  for (const std::vector<int32_t>& p : job.prompts) sizes.push_back(p.size());
  apply_prompt_fields(job.prompts, c, PromptRoom{engine.limits().max_model_len(), job.asked_max_tokens}, ctx.tokenizer);
  job.trimmed.clear();
  for (size_t i = 0; i < job.prompts.size(); ++i) job.trimmed.push_back(job.prompts[i].size() != sizes[i]);
  // One scoring pass serves the API's own (echo) and vLLM's prompt_logprobs.
  if (c.prompt_logprobs >= 0) job.prompt_logprobs = std::max(job.prompt_logprobs, c.prompt_logprobs);
  job.max_tokens = job.asked_max_tokens ? *job.asked_max_tokens : context_room(ctx, engine, job.prompts, c.n);
  check_min_tokens(c, job.max_tokens);
  job.grammar = request_grammar(ctx, c.constraint, job.tools);
  if (!c.timeout_s && ctx.policy.request_timeout_s > 0) c.timeout_s = ctx.policy.request_timeout_s;
}

std::optional<std::vector<engine::GenerationResult>> run_to_end(ServingContext& ctx, engine::Engine& engine,
                                                                const GenerationJob& job, const HttpRequest& req,
                                                                const Generation::EventObserver& observe) {
  const int n = job.common.n;
  Generation gen(engine, job.prompts, job.request(), n, ctx.stats);
  std::vector<engine::GenerationResult> results = gen.wait_all([&req] { return req.client_gone(); }, observe);
  record_outcome(finals_of(results), n);
  if (!req.client_gone()) return results;
  // Nobody reads the answer; say so in the log line.
  current_record().client_disconnected = true;
  ctx.stats.on_disconnect();
  return std::nullopt;
}

std::unique_ptr<Generation> submit_for_stream(ServingContext& ctx, engine::Engine& engine, const GenerationJob& job) {
  auto gen = std::make_unique<Generation>(engine, job.prompts, job.request(), job.common.n, ctx.stats);
  gen->wait_first_events(ctx.first_event_deadline(engine));
  return gen;
}

void respond_with_stream(ServingContext& ctx, std::unique_ptr<Generation> gen, const GenerationJob& job,
                         std::shared_ptr<StreamShape> shape, HttpResponse& res) {
  auto stream = std::make_shared<GenerationStream>(std::move(gen), job.common.n, job.prompts, *shape,
                                                   stream_limits(ctx), ctx.stats);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  // The whole stream is written in this one call on the worker's thread;
  // returning false drops the connection.
  res.set_stream("text/event-stream", [shape, stream](ResponseStream& out) { return stream->run(out); });
}

}  // namespace tokenmill::server
