#include "server/tokenize_endpoints.h"

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/llamacpp/llamacpp_response.h"
#include "server/openai/openai_request.h"
#include "server/openai/openai_response.h"

namespace tokenmill::server {

using nlohmann::json;

void add_tokenize_routes(RouteTable& routes, ServingContext& ctx) {
  routes.add("POST", "/tokenize", true,
             [&ctx](HttpRequest& req, HttpResponse& res) { handle_tokenize(ctx, req, res); });
  routes.add("POST", "/detokenize", true,
             [&ctx](HttpRequest& req, HttpResponse& res) { handle_detokenize(ctx, req, res); });
}

void handle_tokenize(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const engine::Engine& e = ctx.require_engine();
  const TokenizeRequest r = parse_tokenize_request(req.body, ctx.parse_limits());
  ctx.check_model(r.model);
  const tokenizer::Tokenizer& tok = ctx.require_tokenizer(r.is_chat ? "messages" : "prompt");
  // Tokenizing costs CPU per byte (a few MB/s): no more text than a prompt
  // could hold, as generation requests check before they tokenize.
  size_t bytes = r.prompt.size();
  for (const ApiMessage& m : r.conversation.messages) bytes += m.content.size();
  const int64_t max_len = e.limits().max_model_len();
  if (max_len > 0 && ctx.max_token_bytes > 0 && bytes > static_cast<size_t>(max_len) * ctx.max_token_bytes)
    throw ApiError(413,
                   fmt::format("the text to tokenize is {} bytes; this server tokenizes at most {} bytes, what this "
                               "model's context of {} tokens can hold",
                               bytes, static_cast<size_t>(max_len) * ctx.max_token_bytes, max_len),
                   "invalid_request_error", std::string(r.is_chat ? "messages" : "prompt"), "request_too_large");
  std::vector<int32_t> ids;
  if (r.is_chat) {
    if (!ctx.chat) bad_request("messages", "the model has no recognised chat template");
    ChatRenderOptions render;
    render.add_generation_prompt = r.add_generation_prompt;
    ids = chat_prompt_tokens(*ctx.chat, tok, r.conversation, render);
  } else {
    ids = tok.encode(r.prompt, r.add_special_tokens, r.parse_special);
  }
  json body = {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", e.limits().max_model_len()}};
  if (r.llama_shape && r.with_pieces) {
    // llama.cpp's shape: each token as {"id", "piece"}, the piece a string
    // when it is valid UTF-8, else its bytes.
    json tokens = json::array();
    for (int32_t id : ids) tokens.push_back({{"id", id}, {"piece", llama_piece_json(tok.token_to_piece(id, true))}});
    body["tokens"] = std::move(tokens);
  } else if (r.with_pieces) {
    json pieces = json::array();
    for (int32_t id : ids) pieces.push_back(token_display(tok.token_to_piece(id, /*special=*/true)));
    body["pieces"] = pieces;
  }
  res.set_content(dump_json(body), "application/json");
}

void handle_detokenize(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  ctx.require_engine();
  const DetokenizeRequest r = parse_detokenize_request(req.body, ctx.parse_limits());
  ctx.check_model(r.model);
  const tokenizer::Tokenizer& tok = ctx.require_tokenizer("tokens");
  const std::string text = tok.decode(r.tokens, /*skip_special=*/false);
  // "content" is llama.cpp's name for it.
  res.set_content(dump_json({{"prompt", text}, {"content", text}}), "application/json");
}

}  // namespace tokenmill::server
