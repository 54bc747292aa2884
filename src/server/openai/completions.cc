// POST /v1/completions and /v1/chat/completions: parse, tokenize, submit to
// the engine, answer (one JSON body, or an SSE stream).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <random>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/openai/openai_response.h"
#include "server/prompt_tokens.h"
#include "server/request_extensions.h"
#include "server/request_log.h"
#include "server/serving_context.h"
#include "server/stream_session.h"
#include "server/structured_output.h"
#include "util/error.h"

namespace tokenmill::server {

namespace {

using nlohmann::json;

constexpr int64_t kDefaultCompletionTokens = 16;  // OpenAI's default for /v1/completions

TokenPieceFn piece_fn(const tokenizer::Tokenizer* tok) {
  return [tok](int32_t id) { return tok ? tok->token_to_piece(id, /*special=*/true) : fmt::format("<{}>", id); };
}

engine::Usage total_usage(const std::vector<engine::GenerationResult>& results, int n) {
  engine::Usage total;
  for (size_t i = 0; i < results.size(); ++i) {
    const engine::Usage& u = results[i].final.usage;
    if (i % static_cast<size_t>(n) == 0) {  // a prompt counts once, whatever n is
      total.prompt_tokens += u.prompt_tokens;
      total.cached_prompt_tokens += u.cached_prompt_tokens;
    }
    total.completion_tokens += u.completion_tokens;
  }
  return total;
}

void fill_record(RequestRecord& r, const ResponseMeta& meta, const std::string& tenant, bool stream) {
  r.response_id = meta.id;
  r.model = meta.model;
  r.tenant = tenant;
  r.stream = stream;
}

void record_results(RequestRecord& r, const std::vector<engine::GenerationResult>& results, const engine::Usage& u) {
  r.num_choices = static_cast<int>(results.size());
  r.prompt_tokens = u.prompt_tokens;
  r.completion_tokens = u.completion_tokens;
  r.cached_tokens = u.cached_prompt_tokens;
  if (results.empty()) return;
  const engine::FinalEvent& f = results[0].final;
  r.finish_reason = finish_reason_text(f.reason);
  r.queue_ms = f.timings.queue_ms;
  r.ttft_ms = f.timings.ttft_ms;
  r.e2e_ms = f.timings.e2e_ms;
}

// A text longer than the context could hold whatever its tokens are is
// refused before it is tokenized: tokenizing megabytes costs seconds of a
// worker's time for a request that must fail anyway.
void check_prompt_bytes(const ServingContext& ctx, const engine::Engine& engine, size_t bytes, const char* param) {
  const int64_t max_len = engine.limits().max_model_len();
  if (max_len <= 0 || ctx.max_token_bytes == 0) return;
  const size_t limit = static_cast<size_t>(max_len) * ctx.max_token_bytes;
  if (bytes <= limit) return;
  throw ApiError(400,
                 fmt::format("the {} is {} bytes; this model's context of {} tokens holds at most {} bytes of text",
                             param, bytes, max_len, limit),
                 "invalid_request_error", std::string(param), "context_length_exceeded");
}

// The server's defaults for what the request left out.
void apply_policy(const ServingContext& ctx, SamplingRequest& c) {
  if (!c.timeout_s && ctx.policy.request_timeout_s > 0) c.timeout_s = ctx.policy.request_timeout_s;
}

// Everything both endpoints share once the prompts are tokens.
struct Job {
  ApiKind kind = ApiKind::kCompletion;
  ResponseMeta meta;
  SamplingRequest common;
  std::string tenant;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> echo_texts;  // completions with echo
  int64_t max_tokens = 0;               // 0: echo only, nothing to generate
  int prompt_logprobs = -1;             // echo with logprobs: score the prompt (engine prompt_logprobs)
  int echo_top = 0;                     // alternatives the echo reports (prompt_logprobs may ask more)
  std::shared_ptr<const grammar::CompiledGrammar> grammar;  // constrained decoding, or null
  bool tool_calls = false;                                  // chat with active tools: parse the output into tool_calls
  std::shared_ptr<const model::LoraAdapter> adapter;        // picked by `model`, or null (the base)

  engine::GenerateRequest request() const {
    engine::GenerateRequest r = engine_request(common, tenant, max_tokens, prompt_logprobs, grammar);
    r.adapter = adapter;
    return r;
  }

  // Whether the engine runs at all: echo without logprobs and max_tokens 0
  // needs nothing from it.
  bool needs_engine() const { return max_tokens > 0 || prompt_logprobs >= 0; }
};

void respond_stream(ServingContext& ctx, engine::Engine* engine, Job& job, HttpResponse& res) {
  std::unique_ptr<Generation> gen;
  if (job.needs_engine()) {
    gen = std::make_unique<Generation>(*engine, job.prompts, job.request(), job.common.n, ctx.stats);
    gen->wait_first_events(ctx.first_event_deadline(*engine));
  }
  StreamSpec spec;
  spec.kind = job.kind;
  spec.meta = job.meta;
  spec.include_usage = job.common.include_usage;
  spec.logprobs = job.common.logprobs;
  spec.n = job.common.n;
  spec.echo_texts = job.echo_texts;
  if (job.prompt_logprobs >= 0) spec.echo_prompts = job.prompts;
  for (const auto& p : job.prompts) spec.prompt_tokens.push_back(static_cast<int64_t>(p.size()));
  spec.keep_alive = ctx.keep_alive;
  spec.tool_calls = job.tool_calls;
  spec.max_unsent_bytes = ctx.policy.max_unsent_bytes;
  spec.stalled_client_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(ctx.policy.stalled_client_timeout_s * 1000.0));
  auto session = std::make_shared<StreamSession>(std::move(gen), std::move(spec), piece_fn(ctx.tokenizer), ctx.stats);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  // The whole stream is written in this one call on the worker's thread;
  // returning false drops the connection.
  res.set_stream("text/event-stream", [session](ResponseStream& out) { return session->run(out); });
}

// Log-probabilities with at most `top` alternatives each (one scoring pass
// serves echo and prompt_logprobs, which may ask for different numbers).
std::vector<engine::TokenLogprob> with_top(std::vector<engine::TokenLogprob> lps, int top) {
  for (engine::TokenLogprob& lp : lps)
    if (lp.top.size() > static_cast<size_t>(top)) lp.top.resize(static_cast<size_t>(top));
  return lps;
}

json choice_logprobs(ServingContext& ctx, const Job& job, size_t i, const engine::GenerationResult& r) {
  if (!job.common.logprobs) return nullptr;
  const size_t p = i / static_cast<size_t>(job.common.n);
  if (job.kind == ApiKind::kChat) return chat_logprobs_json(r.tokens, r.logprobs, piece_fn(ctx.tokenizer));
  if (!job.echo_texts.empty() && job.prompt_logprobs >= 0) {  // echo: the prompt's tokens first
    json all = prompt_logprobs_json(job.prompts[p], with_top(r.prompt_logprobs, job.echo_top), piece_fn(ctx.tokenizer));
    const int64_t offset0 = pieces_size(job.prompts[p], piece_fn(ctx.tokenizer));
    append_logprobs_json(all, completion_logprobs_json(r.tokens, r.logprobs, offset0, piece_fn(ctx.tokenizer)));
    return all;
  }
  const int64_t offset0 = p < job.echo_texts.size() ? static_cast<int64_t>(job.echo_texts[p].size()) : 0;
  return completion_logprobs_json(r.tokens, r.logprobs, offset0, piece_fn(ctx.tokenizer));
}

void respond_whole(ServingContext& ctx, engine::Engine* engine, Job& job, const HttpRequest& req, HttpResponse& res) {
  std::vector<engine::GenerationResult> results;
  if (job.needs_engine()) {
    Generation gen(*engine, job.prompts, job.request(), job.common.n, ctx.stats);
    results = gen.wait_all([&req] { return req.client_gone(); });
    if (req.client_gone()) {
      // Nobody reads the answer; say so in the log line.
      RequestRecord& r = current_record();
      r.client_disconnected = true;
      record_results(r, results, total_usage(results, job.common.n));
      ctx.stats.on_disconnect();
      return;
    }
  } else {
    results.resize(job.prompts.size() * static_cast<size_t>(job.common.n));
    for (size_t i = 0; i < results.size(); ++i) {
      results[i].final.reason = engine::FinishReason::kLength;
      results[i].final.usage.prompt_tokens = static_cast<int64_t>(job.prompts[i / job.common.n].size());
    }
  }
  for (const engine::GenerationResult& r : results)
    if (std::optional<ApiError> e = failure_error(r.final)) throw *e;
  std::vector<ChoiceOutput> choices;
  for (size_t i = 0; i < results.size(); ++i) {
    const size_t p = i / static_cast<size_t>(job.common.n);
    ChoiceOutput c;
    c.index = static_cast<int>(i);
    c.text = (p < job.echo_texts.size() ? job.echo_texts[p] : "") + results[i].text;
    c.finish_reason = finish_reason_text(results[i].final.reason);
    c.logprobs = choice_logprobs(ctx, job, i, results[i]);
    if (job.common.prompt_logprobs >= 0)
      c.prompt_logprobs = vllm_prompt_logprobs_json(job.prompts[p], results[i].prompt_logprobs,
                                                    job.common.prompt_logprobs, piece_fn(ctx.tokenizer));
    if (job.tool_calls) apply_tool_calls(c);
    choices.push_back(std::move(c));
  }
  const engine::Usage usage = total_usage(results, job.common.n);
  const json timings = timings_json(results[0].final.timings, results[0].final.usage, results[0].final.spec);
  const json body = job.kind == ApiKind::kChat ? chat_response(job.meta, choices, usage_json(usage), timings)
                                               : completion_response(job.meta, choices, usage_json(usage), timings);
  record_results(current_record(), results, usage);
  res.set_content(dump_json(body), "application/json");
}

void run_job(ServingContext& ctx, engine::Engine* engine, Job& job, const HttpRequest& req, HttpResponse& res) {
  fill_record(current_record(), job.meta, job.tenant, job.common.stream);
  try {
    if (job.common.stream) {
      respond_stream(ctx, engine, job, res);
    } else {
      respond_whole(ctx, engine, job, req, res);
    }
  } catch (const ApiError& e) {
    // A chat prompt comes from its messages: name that field.
    if (job.kind != ApiKind::kChat || e.param() != "prompt") throw;
    ApiError renamed(e.status(), e.what(), e.type(), std::string("messages"), e.code());
    throw renamed.with_retry_after(e.retry_after_s());
  }
}

std::vector<size_t> prompt_sizes(const std::vector<std::vector<int32_t>>& prompts) {
  std::vector<size_t> sizes;
  for (const std::vector<int32_t>& p : prompts) sizes.push_back(p.size());
  return sizes;
}

// The extension fields that act on the tokenized prompts: truncation
// (truncate_prompt_tokens, n_keep; `asked`: the completion tokens the
// request gives, if any), bad_words, and the scoring prompt_logprobs needs.
void apply_prompt_extensions(ServingContext& ctx, const engine::Engine& engine, Job& job,
                             std::optional<int64_t> asked) {
  SamplingRequest& c = job.common;
  apply_prompt_fields(job.prompts, c, PromptRoom{engine.limits().max_model_len(), asked}, ctx.tokenizer);
  if (c.prompt_logprobs >= 0) job.prompt_logprobs = std::max(job.prompt_logprobs, c.prompt_logprobs);
}

// max_tokens for a request that may run to the end of the context (a chat
// without max_tokens, n_predict -1): what the context (or the KV pool, or
// each sample's share of it) leaves after the longest prompt, at most
// --default-max-tokens when the server sets it.
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

void handle_completions(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  engine::Engine& engine = ctx.require_engine();
  CompletionRequest r = parse_completion_request(req.body, ctx.parse_limits());
  Job job;
  job.kind = ApiKind::kCompletion;
  ServingContext::ModelChoice model = ctx.select_model(r.common.model);
  job.meta = {new_response_id("cmpl-"), std::time(nullptr), model.name};
  job.adapter = std::move(model.adapter);
  job.tenant = req.tenant;
  job.common = std::move(r.common);
  SamplingRequest& c = job.common;
  // echo with logprobs reports the prompt's tokens too (what perplexity and
  // lm-eval-harness' loglikelihood use); max_tokens 0 then only scores.
  if (r.echo && c.logprobs) job.prompt_logprobs = job.echo_top = c.top_logprobs;
  // A prompt the request asks to shorten may be longer than the context.
  const bool may_truncate = c.truncate_prompt_tokens || (c.n_keep && *c.n_keep >= 0);
  for (PromptInput& p : r.prompts) {
    if (p.is_text && !may_truncate) check_prompt_bytes(ctx, engine, p.text.size(), "prompt");
    if (p.is_text)
      p.tokens = ctx.require_tokenizer("prompt").encode(p.text, c.add_special_tokens.value_or(true), false);
    if (p.tokens.empty()) bad_request("prompt", "the prompt is empty after tokenization");
    job.prompts.push_back(std::move(p.tokens));
  }
  std::optional<int64_t> asked;
  if (!c.max_tokens_to_context) asked = c.max_tokens.value_or(kDefaultCompletionTokens);
  const std::vector<size_t> sizes = prompt_sizes(job.prompts);
  apply_prompt_extensions(ctx, engine, job, asked);
  for (size_t i = 0; r.echo && i < job.prompts.size(); ++i) {
    // A shortened prompt echoes what the model saw.
    const bool as_sent = r.prompts[i].is_text && job.prompts[i].size() == sizes[i];
    job.echo_texts.push_back(as_sent         ? r.prompts[i].text
                             : ctx.tokenizer ? ctx.tokenizer->decode(job.prompts[i], /*skip_special=*/false)
                                             : std::string());
  }
  job.max_tokens = asked ? *asked : context_room(ctx, engine, job.prompts, c.n);
  check_min_tokens(c, job.max_tokens);
  job.grammar = request_grammar(ctx, c.constraint, nullptr);
  apply_policy(ctx, c);
  run_job(ctx, &engine, job, req, res);
}

void handle_chat_completions(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  engine::Engine& engine = ctx.require_engine();
  ChatRequest r = parse_chat_request(req.body, ctx.parse_limits());
  Job job;
  job.kind = ApiKind::kChat;
  ServingContext::ModelChoice model = ctx.select_model(r.common.model);
  job.meta = {new_response_id("chatcmpl-"), std::time(nullptr), model.name};
  job.adapter = std::move(model.adapter);
  job.tenant = req.tenant;
  const tokenizer::Tokenizer& tok = ctx.require_tokenizer("messages");
  if (!ctx.chat)
    bad_request("messages", "the model has no recognised chat template; start the server with --chat-template NAME");
  size_t message_bytes = 0;
  for (const tokenizer::ChatMessage& m : r.messages) message_bytes += m.content.size();
  const bool may_truncate = r.common.truncate_prompt_tokens || (r.common.n_keep && *r.common.n_keep >= 0);
  if (!may_truncate) check_prompt_bytes(ctx, engine, message_bytes, "messages");
  const ChatRenderOptions render{r.add_generation_prompt, r.continue_final_message,
                                 r.common.add_special_tokens.value_or(false)};
  try {
    job.prompts.push_back(chat_prompt_tokens(*ctx.chat, tok, r.messages, render));
  } catch (const Error& e) {
    bad_request("messages", "{}", e.what());
  }
  job.common = std::move(r.common);
  SamplingRequest& c = job.common;
  std::optional<int64_t> asked = c.max_tokens;
  if (c.max_tokens_to_context) asked.reset();
  apply_prompt_extensions(ctx, engine, job, asked);
  // Without max_tokens a chat may run to the end of the context (OpenAI's
  // rule), unless the server sets a default (--default-max-tokens).
  job.max_tokens = asked ? *asked : context_room(ctx, engine, job.prompts, c.n);
  check_min_tokens(c, job.max_tokens);
  job.grammar = request_grammar(ctx, c.constraint, &r.tools);
  job.tool_calls = r.tools.active();
  apply_policy(ctx, c);
  run_job(ctx, &engine, job, req, res);
}

}  // namespace tokenmill::server
