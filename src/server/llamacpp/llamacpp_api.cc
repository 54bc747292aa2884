#include "server/llamacpp/llamacpp_api.h"

#include "server/llamacpp/llamacpp_apply_template.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string_view>

#include "gguf/reader.h"
#include "server/admin/lora_endpoints.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "server/generation_job.h"
#include "server/generation_stream.h"
#include "server/llamacpp/llamacpp_session.h"
#include "server/openai/embeddings.h"
#include "server/openai/openai_response.h"
#include "server/request_log.h"

namespace tokenmill::server {

using nlohmann::json;

namespace {

size_t llama_text_bytes(const RequestJson& prompt) {
  if (prompt.is_string()) return prompt.get_ref<const std::string&>().size();
  size_t n = 0;
  if (prompt.is_array())
    for (const RequestJson& e : prompt) n += llama_text_bytes(e);
  return n;
}

// The adapter of a llama.cpp request: `model` names one as on the OpenAI
// routes, or "lora" picks one by its GET /lora-adapters index (the two
// must agree when both do).
ServingContext::ModelChoice llama_model_choice(const ServingContext& ctx, const std::string& model,
                                               std::optional<int64_t> lora_id) {
  ServingContext::ModelChoice choice = ctx.select_model(model);
  if (!lora_id) return choice;
  const std::vector<LoraEntry> adapters = ctx.loras->list();
  if (*lora_id >= static_cast<int64_t>(adapters.size()))
    bad_request("lora", "'lora' names adapter {}, but {} adapters are loaded (see GET /lora-adapters)", *lora_id,
                adapters.size());
  const LoraEntry& picked = adapters[static_cast<size_t>(*lora_id)];
  if (choice.adapter && choice.adapter != picked.adapter)
    bad_request("lora", "'lora' picks adapter '{}' but 'model' names '{}'", picked.name, choice.name);
  if (!choice.adapter) ctx.loras->count_request(picked.name);
  return ServingContext::ModelChoice{picked.name, picked.adapter};
}

LlamaResponseSpec llama_response_spec(const LlamaBody& body, const SamplingRequest& c, const std::string& model,
                                      int64_t max_tokens, int64_t n_ctx) {
  LlamaResponseSpec spec;
  spec.model = model;
  spec.settings = llama_generation_settings(c, max_tokens, n_ctx, model);
  spec.stops = c.sampling.stop;
  spec.n_ctx = n_ctx;
  spec.return_tokens = body.return_tokens;
  spec.probs = c.logprobs;
  spec.stream = c.stream;
  spec.fields = body.response_fields;
  return spec;
}

// "a=1&fail_on_no_slot=1" -> whether the flag is set.
bool query_flag(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) {
      const std::string_view v = eq == std::string_view::npos ? std::string_view("1") : pair.substr(eq + 1);
      return v == "1" || v == "true";
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return false;
}

json slot_json(const SlotState& s, bool busy, const json& params, int64_t n_ctx) {
  return {{"id", s.id},
          {"id_task", s.id_task},
          {"n_ctx", n_ctx},
          {"speculative", false},
          {"is_processing", busy},
          {"params", params},
          {"prompt", ""},
          {"next_token",
           {{"has_next_token", busy},
            {"has_new_line", s.has_new_line},
            {"n_remain", s.n_remain},
            {"n_decoded", s.n_decoded},
            {"stopping_word", ""}}}};
}

std::string token_text_or_empty(const tokenizer::Tokenizer* tok, int32_t id) {
  return tok && id >= 0 && id < tok->vocab_size() ? tok->token_text(id) : std::string();
}

}  // namespace

void LlamaCppApi::attach(const engine::Engine& engine) {
  const gguf::GgufFile& file = engine.model_file();
  // The template chat requests are rendered with (the GGUF's or
  // --chat-template-file's), as llama-server reports it.
  if (ctx_.chat && ctx_.chat->jinja) {
    chat_template_ = ctx_.chat->jinja->tmpl.source();
  } else {
    chat_template_ = file.has("tokenizer.chat_template") && file.find("tokenizer.chat_template")->is_string()
                         ? file.get_string("tokenizer.chat_template")
                         : std::string();
  }
  fim_ = find_fim_tokens(file, engine.tokenizer());
  slots_.set_total(engine.limits().capacity.max_seqs);
}

CompletionRequest LlamaCppApi::parse_sampling(LlamaBody& body, const std::vector<std::vector<int32_t>>& prompts) const {
  body.sampling["prompt"] = prompts;
  return parse_completion_request(body.sampling.dump(), ctx_.parse_limits());
}

void LlamaCppApi::handle_completion(const HttpRequest& req, HttpResponse& res) {
  engine::Engine& engine = ctx_.require_engine();
  const ParseLimits limits = ctx_.parse_limits();
  LlamaBody body = translate_llama_body(req.body, /*infill=*/false, ctx_.tokenizer, limits);
  // Parsed with a stand-in prompt: the prompt forms are llama.cpp's, and
  // tokenizing them needs the parsed add_special_tokens.
  CompletionRequest r = parse_sampling(body, {{0}});
  if (body.prompts.size() * static_cast<size_t>(r.common.n) > kMaxPromptsPerRequest)
    bad_request("n", "{} prompts x n = {} choices; at most {} are allowed", body.prompts.size(), r.common.n,
                kMaxPromptsPerRequest);
  const SamplingRequest& c = r.common;
  size_t bytes = 0;
  for (const RequestJson& p : body.prompts) bytes += llama_text_bytes(p);
  check_prompt_text(ctx_, engine, c, bytes, "prompt");
  std::vector<std::vector<int32_t>> prompts;
  for (const RequestJson& p : body.prompts) {
    prompts.push_back(tokenize_llama_prompt(p, ctx_.tokenizer, limits, c.add_special_tokens.value_or(true), "prompt"));
    if (prompts.back().empty()) bad_request("prompt", "the prompt is empty after tokenization");
  }
  respond(engine, body, r, std::move(prompts), /*trimmed=*/false, req, res);
}

void LlamaCppApi::handle_infill(const HttpRequest& req, HttpResponse& res) {
  engine::Engine& engine = ctx_.require_engine();
  if (!fim_.usable())
    throw ApiError(501,
                   fmt::format("this model cannot fill in the middle: its vocabulary has no FIM {} token "
                               "(tokenizer.ggml.fim_*_token_id); use /completion",
                               fim_.missing()),
                   "not_supported_error", std::nullopt, "fim_not_supported");
  const tokenizer::Tokenizer& tok = ctx_.require_tokenizer("input_prefix");
  const ParseLimits limits = ctx_.parse_limits();
  LlamaBody body = translate_llama_body(req.body, /*infill=*/true, &tok, limits);
  const InfillFields in = take_infill_fields(body.sampling);
  // Parsed once with a stand-in prompt: the budget of the FIM prompt
  // depends on the max_tokens it asks for.
  CompletionRequest r = parse_sampling(body, {{fim_.mid}});
  const int64_t n_ctx = engine.limits().max_model_len();
  // Without max_tokens, a quarter of the context is kept for the middle.
  const int64_t reserve = r.common.max_tokens && !r.common.max_tokens_to_context ? *r.common.max_tokens : n_ctx / 4;
  const InfillPrompt prompt = build_infill_prompt(fim_, tok, in, limits, std::max<int64_t>(n_ctx - reserve, 0));
  respond(engine, body, r, {prompt.tokens}, prompt.trimmed, req, res);
}

void LlamaCppApi::respond(engine::Engine& engine, const LlamaBody& body, CompletionRequest& r,
                          std::vector<std::vector<int32_t>> prompts, bool trimmed, const HttpRequest& req,
                          HttpResponse& res) {
  if (r.common.prompt_logprobs >= 0)
    bad_request("prompt_logprobs", "'prompt_logprobs' is not part of this endpoint; use /v1/completions");
  ServingContext::ModelChoice choice = llama_model_choice(ctx_, r.common.model, body.lora_id);
  LlamaJob job;
  GenerationJob& gen = job.gen;
  gen.common = std::move(r.common);
  gen.tenant = req.tenant;
  gen.adapter = std::move(choice.adapter);
  gen.prompts = std::move(prompts);
  if (!gen.common.max_tokens_to_context) gen.asked_max_tokens = gen.common.max_tokens;
  prepare_job(ctx_, engine, gen);
  const SamplingRequest& c = gen.common;
  for (const auto& p : gen.prompts)
    job.prompt_texts.push_back(ctx_.tokenizer ? ctx_.tokenizer->decode(p, /*skip_special=*/false) : std::string());
  job.wanted_slot = body.id_slot;
  job.spec = llama_response_spec(body, c, choice.name, gen.max_tokens, engine.limits().max_model_len());
  // n_keep / truncate_prompt_tokens shorten a prompt too long for the
  // context: llama.cpp reports that as "truncated".
  job.spec.prompt_trimmed = trimmed || gen.any_trimmed();
  RequestRecord& rec = current_record();
  rec.model = choice.name;
  rec.tenant = req.tenant;
  rec.stream = c.stream;
  auto session = std::make_shared<LlamaSession>(ctx_, slots_, std::move(job));
  if (!c.stream) {
    if (std::optional<json> answer = session->run_whole(engine, req))
      res.set_content(dump_json(*answer), "application/json");
    return;
  }
  std::unique_ptr<Generation> run = submit_for_stream(ctx_, engine, session->job().gen);
  respond_with_stream(ctx_, std::move(run), session->job().gen, session, res);
}

json LlamaCppApi::default_settings(const engine::Engine& engine) const {
  LlamaBody body = translate_llama_body(R"({"prompt": ""})", /*infill=*/false, ctx_.tokenizer, ctx_.parse_limits());
  const CompletionRequest r = parse_sampling(body, {{0}});
  return llama_generation_settings(r.common, -1, engine.limits().max_model_len(), ctx_.check_model(""));
}

void LlamaCppApi::handle_props(const HttpRequest&, HttpResponse& res) {
  const engine::Engine& engine = ctx_.require_engine();
  const tokenizer::Tokenizer* tok = ctx_.tokenizer;
  SlotState idle;
  json settings = slot_json(idle, false, default_settings(engine), engine.limits().max_model_len());
  settings["n_ctx"] = engine.limits().max_model_len();
  const json body = {{"default_generation_settings", settings},
                     {"total_slots", slots_.total()},
                     {"model_path", ctx_.model_path},
                     {"model_alias", ctx_.check_model("")},
                     {"chat_template", chat_template_},
                     {"chat_template_caps", json::object()},
                     {"modalities", {{"vision", false}, {"audio", false}}},
                     {"bos_token", token_text_or_empty(tok, tok ? tok->bos_id() : -1)},
                     {"eos_token", token_text_or_empty(tok, tok ? tok->eos_id() : -1)},
                     {"fim", fim_.usable()},
                     {"build_info", "tokenmill"},
                     {"is_sleeping", false}};
  res.set_content(dump_json(body), "application/json");
}

void LlamaCppApi::handle_slots(const HttpRequest& req, HttpResponse& res) {
  const engine::Engine& engine = ctx_.require_engine();
  // Another tenant's request shows as a busy slot and nothing more, as the
  // requests of the other endpoints do: its settings, stop strings,
  // grammar and progress are its own.
  const std::vector<SlotState> board = slots_.snapshot_for(req.tenant, req.sees_all_tenants);
  const int64_t n_ctx = engine.limits().max_model_len();
  int64_t known = 0;
  for (const SlotState& s : board) known += s.busy ? 1 : 0;
  // Sequences of the other endpoints run without a board slot: the engine
  // counts them, and the first idle slots show them as busy.
  int64_t unknown = std::max<int64_t>(engine.metrics().running - known, 0);
  const int64_t busy_total = known + unknown;
  if (query_flag(req.query, "fail_on_no_slot") && busy_total >= static_cast<int64_t>(board.size()))
    throw ApiError(503, "no slot available", "unavailable_error", std::nullopt, "no_slot_available")
        .with_retry_after(1);
  const json defaults = default_settings(engine);
  json out = json::array();
  for (const SlotState& s : board) {
    const bool other = !s.busy && unknown > 0;
    if (other) --unknown;
    out.push_back(slot_json(s, s.busy || other, s.busy && !s.params.is_null() ? s.params : defaults, n_ctx));
  }
  res.set_content(dump_json(out), "application/json");
}

void LlamaCppApi::handle_slot_action(const HttpRequest&, HttpResponse&) {
  throw ApiError(501,
                 "slot save, restore and erase are not supported: tokenmill keeps no per-slot prompt cache "
                 "(its prefix cache is shared by every request)",
                 "not_supported_error", std::nullopt, "not_supported");
}

void add_llamacpp_routes(RouteTable& routes, ServingContext& ctx) {
  auto api = std::make_shared<LlamaCppApi>(ctx);
  ctx.on_attach.push_back([api](const engine::Engine& engine) { api->attach(engine); });
  auto llama = [api](void (LlamaCppApi::*fn)(const HttpRequest&, HttpResponse&)) {
    return [api, fn](HttpRequest& req, HttpResponse& res) { ((*api).*fn)(req, res); };
  };
  routes.add("POST", "/completion", true, llama(&LlamaCppApi::handle_completion));
  routes.add("POST", "/infill", true, llama(&LlamaCppApi::handle_infill));
  routes.add("GET", "/props", true, llama(&LlamaCppApi::handle_props));
  routes.add("GET", "/slots", true, llama(&LlamaCppApi::handle_slots));
  routes.add("POST", "/slots/([0-9]+)", true, llama(&LlamaCppApi::handle_slot_action));
  routes.add("POST", "/embedding", true,
             [&ctx](HttpRequest& req, HttpResponse& res) { handle_llama_embedding(ctx, req, res); });
  routes.add("GET", "/lora-adapters", true,
             [&ctx](HttpRequest& req, HttpResponse& res) { handle_llama_lora_adapters(ctx, req, res); });
  routes.add("POST", "/apply-template", true,
             [&ctx](HttpRequest& req, HttpResponse& res) { handle_apply_template(ctx, req, res); });
}

}  // namespace tokenmill::server
