#include "server/openai/embeddings.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/openai/openai_response.h"
#include "server/request_log.h"

namespace tokenmill::server {

using nlohmann::json;

std::string embedding_base64(std::span<const float> values) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  bytes.reserve(values.size() * 4);
  for (float v : values) {
    const auto bits = std::bit_cast<uint32_t>(v);
    for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>((bits >> (8 * k)) & 0xffu));
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t group = 0;
    for (size_t k = 0; k < 3; ++k) group = (group << 8) | (k < n ? static_cast<uint8_t>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out.push_back(k <= n ? kAlphabet[(group >> (18 - 6 * k)) & 0x3fu] : '=');
  }
  return out;
}

json embedding_json(std::span<const float> values) {
  json out = json::array();
  for (float v : values) {
    // JSON numbers are read as doubles: the double nearest the float's
    // shortest decimal form prints as that form (0.1f -> 0.1, not
    // 0.10000000149011612) and converts back to the same float.
    double d = v;
    if (std::isfinite(v)) {
      const std::string text = fmt::format("{}", v);
      std::from_chars(text.data(), text.data() + text.size(), d);
    }
    out.push_back(d);
  }
  return out;
}

json embeddings_response(const std::vector<std::vector<float>>& vectors, EmbeddingEncoding encoding,
                         const std::string& model, int64_t prompt_tokens) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json item = {{"object", "embedding"}, {"index", i}};
    item["embedding"] =
        encoding == EmbeddingEncoding::kBase64 ? json(embedding_base64(vectors[i])) : embedding_json(vectors[i]);
    data.push_back(std::move(item));
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

json llama_embedding_response(const std::vector<std::vector<float>>& vectors) {
  json out = json::array();
  for (size_t i = 0; i < vectors.size(); ++i)
    out.push_back({{"index", i}, {"embedding", json::array({embedding_json(vectors[i])})}});
  return out;
}

namespace {

// Tokenizes text inputs and checks every input against the context: an
// embedding input must leave one position free, as every engine request
// does. A text too long for the context whatever it tokenizes to is
// refused before tokenizing (which would cost a worker seconds on
// megabytes).
std::vector<std::vector<int32_t>> embedding_prompts(const ServingContext& ctx, const engine::Engine& engine,
                                                    std::vector<PromptInput>& inputs, const std::string& param) {
  const int64_t max_len = engine.limits().max_model_len();
  std::vector<std::vector<int32_t>> prompts;
  prompts.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    PromptInput& in = inputs[i];
    const std::string which = inputs.size() > 1 ? fmt::format("{}[{}]", param, i) : param;
    if (in.is_text) {
      if (max_len > 0 && ctx.max_token_bytes > 0 && in.text.size() > static_cast<size_t>(max_len) * ctx.max_token_bytes)
        throw ApiError(400,
                       fmt::format("{} is {} bytes of text, more than this model's context of {} tokens can hold",
                                   which, in.text.size(), max_len),
                       "invalid_request_error", param, "context_length_exceeded");
      in.tokens = ctx.require_tokenizer(param.c_str()).encode(in.text, /*add_special=*/true, /*parse_special=*/false);
      if (in.tokens.empty()) bad_request(param, "{} is empty after tokenization", which);
    }
    const auto n = static_cast<int64_t>(in.tokens.size());
    if (max_len > 0 && n >= max_len)
      throw ApiError(400,
                     fmt::format("{} has {} tokens; this model's context of {} tokens embeds at most {}", which, n,
                                 max_len, max_len - 1),
                     "invalid_request_error", param, "context_length_exceeded");
    prompts.push_back(std::move(in.tokens));
  }
  return prompts;
}

struct EmbeddingOutcome {
  std::vector<std::vector<float>> vectors;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  double e2e_ms = -1;      // of the slowest input
  bool abandoned = false;  // the client left: nobody reads an answer
};

// An error the engine reported for one input; refusals name the input field.
void throw_embedding_failure(const engine::FinalEvent& f, const std::string& param) {
  if (std::optional<ApiError> e = failure_error(f, param)) throw *e;
  if (f.reason == engine::FinishReason::kTimeout)
    throw ApiError(503, "the embedding did not finish before the request's deadline", "service_unavailable",
                   std::nullopt, "timeout");
  if (f.embedding.empty())
    throw ApiError(500, "internal error: an embedding request ended without its vector", "server_error");
}

// Submits every prompt at once (they share engine steps) and waits for all.
EmbeddingOutcome run_embeddings(ServingContext& ctx, engine::Engine& engine,
                                const std::vector<std::vector<int32_t>>& prompts, const HttpRequest& req,
                                const std::string& param, std::shared_ptr<const model::LoraAdapter> adapter) {
  engine::GenerateRequest base;
  base.max_tokens = 0;
  base.adapter = std::move(adapter);  // the hidden states are the adapted model's
  base.embedding = ctx.policy.embedding_pooling;
  base.tenant = req.tenant;
  if (ctx.policy.request_timeout_s > 0)
    base.timeout = std::chrono::milliseconds(static_cast<int64_t>(ctx.policy.request_timeout_s * 1000.0));
  std::vector<engine::GenerationResult> results;
  Generation gen(engine, prompts, base, 1, ctx.stats);
  try {
    results = gen.wait_all([&req] { return req.client_gone(); });
  } catch (const ApiError& e) {
    // Refusals speak of prompts and max_tokens; here the input is at fault.
    if (!e.param()) throw;
    ApiError renamed(e.status(), e.what(), e.type(), param, e.code());
    throw renamed.with_retry_after(e.retry_after_s());
  }
  EmbeddingOutcome out;
  for (const engine::GenerationResult& r : results) {
    out.prompt_tokens += r.final.usage.prompt_tokens;
    out.cached_tokens += r.final.usage.cached_prompt_tokens;
    out.e2e_ms = std::max(out.e2e_ms, r.final.timings.e2e_ms);
  }
  if (req.client_gone()) {
    out.abandoned = true;
    return out;
  }
  for (engine::GenerationResult& r : results) {
    throw_embedding_failure(r.final, param);
    out.vectors.push_back(std::move(r.final.embedding));
  }
  return out;
}

// Everything both endpoints share after parsing; false when the client left.
bool answer_embedding_request(ServingContext& ctx, const HttpRequest& req, EmbeddingRequest& r, EmbeddingOutcome& out,
                              std::string& model) {
  const std::string& param = r.input_param;
  engine::Engine& engine = ctx.require_engine();
  ServingContext::ModelChoice choice = ctx.select_model(r.model);
  model = choice.name;
  const int64_t width = engine.model_config().n_embd;
  if (r.dimensions && *r.dimensions != width)
    bad_request("dimensions",
                "this model's embeddings have {} dimensions and are not shortened: 'dimensions' must be "
                "{} or absent, got {}",
                width, width, *r.dimensions);
  // The log line's request fields (OpenAI's embedding answer itself has no id).
  RequestRecord& record = current_record();
  record.response_id = new_response_id("embd-");
  record.model = model;
  record.tenant = req.tenant;
  record.num_choices = static_cast<int>(r.inputs.size());
  const std::vector<std::vector<int32_t>> prompts = embedding_prompts(ctx, engine, r.inputs, param);
  out = run_embeddings(ctx, engine, prompts, req, param, std::move(choice.adapter));
  record.prompt_tokens = out.prompt_tokens;
  record.cached_tokens = out.cached_tokens;
  record.e2e_ms = out.e2e_ms;
  if (out.abandoned) {
    record.client_disconnected = true;
    ctx.stats.on_disconnect();
    return false;
  }
  return true;
}

}  // namespace

void handle_embeddings(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  ctx.require_engine();
  EmbeddingRequest r = parse_embedding_request(req.body, ctx.parse_limits());
  EmbeddingOutcome out;
  std::string model;
  if (!answer_embedding_request(ctx, req, r, out, model)) return;
  res.set_content(dump_json(embeddings_response(out.vectors, r.encoding, model, out.prompt_tokens)),
                  "application/json");
}

void handle_llama_embedding(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  ctx.require_engine();
  EmbeddingRequest r = parse_llama_embedding_request(req.body, ctx.parse_limits());
  EmbeddingOutcome out;
  std::string model;
  if (!answer_embedding_request(ctx, req, r, out, model)) return;
  res.set_content(dump_json(llama_embedding_response(out.vectors)), "application/json");
}

}  // namespace tokenmill::server
