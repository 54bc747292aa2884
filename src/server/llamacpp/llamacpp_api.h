// llama.cpp's native server API on `tokenmill serve`, so that scripts and
// front ends written against llama-server run unchanged:
//   POST /completion   llama.cpp's prompt forms and response shape, streamed
//                      as `data: {...}` chunks (llamacpp_session.h)
//   POST /infill       fill-in-the-middle with the model's FIM tokens
//                      (llamacpp_infill.h)
//   GET  /props        default_generation_settings, total_slots, model_path,
//                      chat_template, build_info, ...
//   GET  /slots        one entry per engine sequence slot (llamacpp_slots.h);
//                      ?fail_on_no_slot=1 answers 503 when none is free
// The request translation is llamacpp_request.h, the response bodies
// llamacpp_response.h; sampling fields go through the OpenAI completions
// parser, so they mean the same on every endpoint.
//
// Thread-safety: attach() runs once, before the engine is published to the
// handlers (ServingContext::engine); the handlers run on many HTTP workers
// at once and share only the slot board (locked) and the context.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "server/http_types.h"
#include "server/llamacpp/llamacpp_infill.h"
#include "server/llamacpp/llamacpp_request.h"
#include "server/llamacpp/llamacpp_slots.h"
#include "server/route_table.h"
#include "server/serving_context.h"

namespace tokenmill::server {

class LlamaCppApi {
 public:
  explicit LlamaCppApi(ServingContext& ctx) : ctx_(ctx) {}

  // Reads what /props and /infill need from the model file (its FIM
  // tokens, chat template) and sizes the slot board to the engine's
  // max_seqs. Call before the engine is stored in the context.
  void attach(const engine::Engine& engine);

  void handle_completion(const HttpRequest& req, HttpResponse& res);
  void handle_infill(const HttpRequest& req, HttpResponse& res);
  void handle_props(const HttpRequest& req, HttpResponse& res);
  void handle_slots(const HttpRequest& req, HttpResponse& res);
  // POST /slots/{id}?action=save|restore|erase: tokenmill keeps no per-slot
  // cache to save; answers 501.
  void handle_slot_action(const HttpRequest& req, HttpResponse& res);

 private:
  // Puts the prompts into the translated body and runs the completions
  // parser on it.
  CompletionRequest parse_sampling(LlamaBody& body, const std::vector<std::vector<int32_t>>& prompts) const;
  void respond(engine::Engine& engine, const LlamaBody& body, CompletionRequest& r,
               std::vector<std::vector<int32_t>> prompts, bool trimmed, const HttpRequest& req, HttpResponse& res);
  // The generation settings of a request that sets nothing.
  nlohmann::json default_settings(const engine::Engine& engine) const;

  ServingContext& ctx_;
  SlotBoard slots_;
  FimTokens fim_;
  std::string chat_template_;
};

// The llama.cpp room's routes (one LlamaCppApi for the server's life,
// attached through ctx.on_attach): /completion, /infill, /props, /slots,
// /slots/{id}, /embedding, /lora-adapters and /apply-template.
void add_llamacpp_routes(RouteTable& routes, ServingContext& ctx);

}  // namespace tokenmill::server
