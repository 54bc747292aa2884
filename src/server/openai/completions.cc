// POST /v1/completions and /v1/chat/completions: parse, tokenize, hand the
// job to the generation pipeline (generation_job.h), answer in OpenAI's
// shape (one JSON body, or an SSE stream: openai_stream.h).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/generation_job.h"
#include "server/generation_stream.h"
#include "server/openai/openai_response.h"
#include "server/openai/openai_stream.h"
#include "server/request_log.h"
#include "server/serving_context.h"
#include "server/structured_output.h"
#include "util/error.h"

namespace tokenmill::server {

namespace {

using nlohmann::json;

constexpr int64_t kDefaultCompletionTokens = 16;  // OpenAI's default for /v1/completions

TokenPieceFn piece_fn(const tokenizer::Tokenizer* tok) {
  return [tok](int32_t id) { return tok ? tok->token_to_piece(id, /*special=*/true) : fmt::format("<{}>", id); };
}

// An OpenAI request once its prompts are tokens: the pipeline's job and
// what only OpenAI's answer shape needs.
struct OpenAiJob {
  ApiKind kind = ApiKind::kCompletion;
  ResponseMeta meta;
  GenerationJob gen;
  std::vector<std::string> echo_texts;  // completions with echo
  int echo_top = 0;                     // alternatives the echo reports (prompt_logprobs may ask more)
  ChatOutputFormat output;              // chat: how the text splits into reasoning, content and tool calls

  int n() const { return gen.common.n; }
};

void respond_stream(ServingContext& ctx, engine::Engine& engine, OpenAiJob& job, HttpResponse& res) {
  std::unique_ptr<Generation> gen = job.gen.needs_engine() ? submit_for_stream(ctx, engine, job.gen) : nullptr;
  StreamSpec spec;
  spec.kind = job.kind;
  spec.meta = job.meta;
  spec.include_usage = job.gen.common.include_usage;
  spec.logprobs = job.gen.common.logprobs;
  spec.n = job.n();
  spec.echo_texts = job.echo_texts;
  if (job.gen.prompt_logprobs >= 0) spec.echo_prompts = job.gen.prompts;
  if (job.kind == ApiKind::kChat) spec.output = job.output;
  const size_t num_choices = job.gen.prompts.size() * static_cast<size_t>(job.n());
  respond_with_stream(ctx, std::move(gen), job.gen,
                      std::make_shared<OpenAiStream>(std::move(spec), num_choices, piece_fn(ctx.tokenizer)), res);
}

// Log-probabilities with at most `top` alternatives each (one scoring pass
// serves echo and prompt_logprobs, which may ask for different numbers).
std::vector<engine::TokenLogprob> with_top(std::vector<engine::TokenLogprob> lps, int top) {
  for (engine::TokenLogprob& lp : lps)
    if (lp.top.size() > static_cast<size_t>(top)) lp.top.resize(static_cast<size_t>(top));
  return lps;
}

json choice_logprobs(ServingContext& ctx, const OpenAiJob& job, size_t i, const engine::GenerationResult& r) {
  if (!job.gen.common.logprobs) return nullptr;
  const size_t p = i / static_cast<size_t>(job.n());
  const std::vector<int32_t>& prompt = job.gen.prompts[p];
  if (job.kind == ApiKind::kChat) return chat_logprobs_json(r.tokens, r.logprobs, piece_fn(ctx.tokenizer));
  if (!job.echo_texts.empty() && job.gen.prompt_logprobs >= 0) {  // echo: the prompt's tokens first
    json all = prompt_logprobs_json(prompt, with_top(r.prompt_logprobs, job.echo_top), piece_fn(ctx.tokenizer));
    const int64_t offset0 = pieces_size(prompt, piece_fn(ctx.tokenizer));
    append_logprobs_json(all, completion_logprobs_json(r.tokens, r.logprobs, offset0, piece_fn(ctx.tokenizer)));
    return all;
  }
  const int64_t offset0 = p < job.echo_texts.size() ? static_cast<int64_t>(job.echo_texts[p].size()) : 0;
  return completion_logprobs_json(r.tokens, r.logprobs, offset0, piece_fn(ctx.tokenizer));
}

ChoiceOutput choice_output(ServingContext& ctx, const OpenAiJob& job, size_t i, const engine::GenerationResult& r) {
  const size_t p = i / static_cast<size_t>(job.n());
  ChoiceOutput c;
  c.index = static_cast<int>(i);
  c.text = (p < job.echo_texts.size() ? job.echo_texts[p] : "") + r.text;
  c.finish_reason = finish_reason_text(r.final.reason);
  c.logprobs = choice_logprobs(ctx, job, i, r);
  if (job.gen.common.prompt_logprobs >= 0)
    c.prompt_logprobs = vllm_prompt_logprobs_json(job.gen.prompts[p], r.prompt_logprobs, job.gen.common.prompt_logprobs,
                                                  piece_fn(ctx.tokenizer));
  if (job.kind == ApiKind::kChat && job.output.active()) apply_chat_output(c, job.output);
  return c;
}

// The results of an echo that generates nothing (max_tokens 0, no scoring).
std::vector<engine::GenerationResult> echo_only_results(const OpenAiJob& job) {
  std::vector<engine::GenerationResult> results(job.gen.prompts.size() * static_cast<size_t>(job.n()));
  for (size_t i = 0; i < results.size(); ++i) {
    results[i].final.reason = engine::FinishReason::kLength;
    results[i].final.usage.prompt_tokens = static_cast<int64_t>(job.gen.prompts[i / job.n()].size());
  }
  return results;
}

void respond_whole(ServingContext& ctx, engine::Engine& engine, OpenAiJob& job, const HttpRequest& req,
                   HttpResponse& res) {
  std::vector<engine::GenerationResult> results;
  if (!job.gen.needs_engine()) {
    results = echo_only_results(job);
    record_outcome(finals_of(results), job.n());
  } else if (std::optional<std::vector<engine::GenerationResult>> r = run_to_end(ctx, engine, job.gen, req)) {
    results = std::move(*r);
  } else {
    return;  // the client left
  }
  std::vector<ChoiceOutput> choices;
  for (size_t i = 0; i < results.size(); ++i) choices.push_back(choice_output(ctx, job, i, results[i]));
  const std::vector<engine::FinalEvent> finals = finals_of(results);
  const json usage = usage_json(total_usage(finals, job.n()));
  const json timings = timings_json(finals[0].timings, finals[0].usage, finals[0].spec);
  const json body = job.kind == ApiKind::kChat ? chat_response(job.meta, choices, usage, timings)
                                               : completion_response(job.meta, choices, usage, timings);
  res.set_content(dump_json(body), "application/json");
}

void run_job(ServingContext& ctx, engine::Engine& engine, OpenAiJob& job, const HttpRequest& req, HttpResponse& res) {
  RequestRecord& r = current_record();
  r.response_id = job.meta.id;
  r.model = job.meta.model;
  r.tenant = job.gen.tenant;
  r.stream = job.gen.common.stream;
  try {
    if (job.gen.common.stream) {
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

// The job's model, adapter, tenant and response id.
OpenAiJob new_job(ServingContext& ctx, ApiKind kind, SamplingRequest common, const HttpRequest& req) {
  OpenAiJob job;
  job.kind = kind;
  ServingContext::ModelChoice model = ctx.select_model(common.model);
  job.meta = {new_response_id(kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-"), std::time(nullptr), model.name};
  job.gen.adapter = std::move(model.adapter);
  job.gen.tenant = req.tenant;
  job.gen.common = std::move(common);
  return job;
}

// A shortened prompt echoes what the model saw; one sent as text and kept
// whole echoes that text.
void set_echo_texts(const ServingContext& ctx, const std::vector<PromptInput>& inputs, OpenAiJob& job) {
  for (size_t i = 0; i < job.gen.prompts.size(); ++i) {
    const bool as_sent = inputs[i].is_text && !job.gen.trimmed[i];
    job.echo_texts.push_back(as_sent         ? inputs[i].text
                             : ctx.tokenizer ? ctx.tokenizer->decode(job.gen.prompts[i], /*skip_special=*/false)
                                             : std::string());
  }
}

}  // namespace

void handle_completions(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  engine::Engine& engine = ctx.require_engine();
  CompletionRequest r = parse_completion_request(req.body, ctx.parse_limits());
  OpenAiJob job = new_job(ctx, ApiKind::kCompletion, std::move(r.common), req);
  SamplingRequest& c = job.gen.common;
  // echo with logprobs reports the prompt's tokens too (what perplexity and
  // lm-eval-harness' loglikelihood use); max_tokens 0 then only scores.
  if (r.echo && c.logprobs) job.gen.prompt_logprobs = job.echo_top = c.top_logprobs;
  for (PromptInput& p : r.prompts) {
    if (p.is_text) {
      check_prompt_text(ctx, engine, c, p.text.size(), "prompt");
      p.tokens = ctx.require_tokenizer("prompt").encode(p.text, c.add_special_tokens.value_or(true), false);
    }
    if (p.tokens.empty()) bad_request("prompt", "the prompt is empty after tokenization");
    job.gen.prompts.push_back(p.tokens);
  }
  if (!c.max_tokens_to_context) job.gen.asked_max_tokens = c.max_tokens.value_or(kDefaultCompletionTokens);
  prepare_job(ctx, engine, job.gen);
  if (r.echo) set_echo_texts(ctx, r.prompts, job);
  run_job(ctx, engine, job, req, res);
}

void handle_chat_completions(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  engine::Engine& engine = ctx.require_engine();
  ChatRequest r = parse_chat_request(req.body, ctx.parse_limits());
  OpenAiJob job = new_job(ctx, ApiKind::kChat, std::move(r.common), req);
  SamplingRequest& c = job.gen.common;
  const tokenizer::Tokenizer& tok = ctx.require_tokenizer("messages");
  if (!ctx.chat)
    bad_request("messages", "the model has no recognised chat template; start the server with --chat-template NAME");
  size_t message_bytes = 0;
  for (const ApiMessage& m : r.conversation.messages) message_bytes += m.content.size();
  check_prompt_text(ctx, engine, c, message_bytes, "messages");
  const ChatRenderOptions render{r.add_generation_prompt, r.continue_final_message,
                                 c.add_special_tokens.value_or(false)};
  ChatPrompt prompt = chat_prompt(*ctx.chat, tok, r.conversation, render);
  job.gen.prompts.push_back(std::move(prompt.ids));
  job.output = ctx.chat->output_format(r.conversation, prompt.text, ctx.reasoning_format);
  r.conversation.tool_request.format = job.output.tool_format;
  r.conversation.tool_request.think_first = job.output.reasoning != ReasoningFormat::kNone;
  r.conversation.tool_request.think_open = job.output.think_open;
  if (job.output.tool_calls) current_record().tool_format = job.output.describe_tools();
  // gpt-oss's channel markers (<|channel|>, <|message|>, <|call|>) are
  // control tokens: the parser must see their text, as written.
  if (job.output.tool_format == ToolCallFormat::kGptOss) {
    c.sampling.skip_special_tokens = false;
    c.sampling.spaces_between_special_tokens = false;
  }
  // Without max_tokens a chat may run to the end of the context (OpenAI's
  // rule), unless the server sets a default (--default-max-tokens).
  if (!c.max_tokens_to_context) job.gen.asked_max_tokens = c.max_tokens;
  job.gen.tools = &r.conversation.tool_request;
  prepare_job(ctx, engine, job.gen);
  run_job(ctx, engine, job, req, res);
}

}  // namespace tokenmill::server
