// What the generation handlers need from the server: the engine (once
// loaded), the tokenizer, the chat template, the served model names, the
// HTTP counters and a few timing knobs. Owned by HttpServer; immutable
// after attach_engine() except through the engine's own thread-safe API.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "grammar/grammar_compiler.h"
#include "server/chat_prompt.h"
#include "server/http_types.h"
#include "server/lora_registry.h"
#include "server/model_profile.h"
#include "server/sampling_request.h"
#include "util/bounded_json.h"

namespace tokenmill::server {

enum class ServerState { kLoading, kReady, kStopping };

// Server-wide defaults and bounds for generation requests (docs/api.md).
struct GenerationPolicy {
  // max_tokens when a chat request gives none; 0: the room left in the
  // context (OpenAI's rule). Completions keep OpenAI's default of 16.
  int64_t default_max_tokens = 0;
  // Deadline of a request that sets no `timeout` (seconds); 0: none.
  double request_timeout_s = 0;
  // Backpressure: a stream whose client has not taken this many bytes is
  // paused (it keeps its KV blocks, generates nothing) until the client
  // catches up to half of it, and cancelled after stalled_client_timeout_s.
  size_t max_unsent_bytes = 256 * 1024;
  double stalled_client_timeout_s = 30;
  // How embedding requests pool the prompt's hidden states (--pooling).
  engine::Pooling embedding_pooling = engine::Pooling::kMean;
};

struct ServingContext {
  std::atomic<engine::Engine*> engine{nullptr};  // null while loading
  std::atomic<ServerState> state{ServerState::kLoading};
  const tokenizer::Tokenizer* tokenizer = nullptr;
  std::optional<ChatFormat> chat;
  // --reasoning-format: what becomes of think spans in chat replies.
  ReasoningFormat reasoning_format = ReasoningFormat::kAuto;
  ModelProfile model_profile;  // base model or not, the chat template and its source (model_profile.h)
  // Compiles output constraints and tool grammars against the tokenizer's
  // vocabulary (thread-safe); null when the model has no tokenizer.
  std::unique_ptr<grammar::GrammarCompiler> grammar_compiler;
  std::vector<std::string> model_names;  // [0] is the id /v1/models reports
  int64_t created = 0;                   // Unix seconds, reported as the model's "created"
  // The LoRA adapters requests may pick by `model` (lora_registry.h); made
  // with the server, filled from attach_engine on.
  std::unique_ptr<LoraRegistry> loras;
  // POST /v1/load_lora_adapter and /v1/unload_lora_adapter answer 403
  // unless the operator opted in (serve --allow-runtime-lora): loading by
  // path lets a client read any adapter file the server can.
  bool allow_runtime_lora = false;
  HttpStats stats;
  // The model file's path as the operator gave it (llama.cpp's /props).
  std::string model_path;
  // Run by HttpServer::attach_engine, once, before the engine is published
  // to the handlers: API rooms read what they need from the model here
  // (its FIM tokens, its chat template, the engine's slots).
  std::vector<std::function<void(const engine::Engine&)>> on_attach;
  // How long a streaming request waits for its first event before the 200
  // headers go out (a refusal after that arrives as an error event).
  std::chrono::milliseconds first_event_wait{2000};
  // When a streaming request's headers may go out at the latest: after
  // first_event_wait, or, with SLO-aware admission, once the engine can no
  // longer refuse it (a queued request is refused when its TTFT or
  // end-to-end target is out of reach): so a refusal is always a 503
  // before any byte, never an error event inside a 200.
  std::chrono::steady_clock::time_point first_event_deadline(const engine::Engine& engine) const;
  // A stream that has nothing to send for this long writes an SSE comment,
  // which is also how a client that went away is noticed.
  std::chrono::milliseconds keep_alive{500};
  GenerationPolicy policy;
  // The most bytes of text one token stands for (the longest piece of the
  // vocabulary): a text over max_model_len times this many bytes cannot
  // fit the context whatever it tokenizes to. 0: no tokenizer.
  size_t max_token_bytes = 0;
  // Request bodies' JSON (util/bounded_json.h): the memory one body's tree
  // may take, and the budget all bodies being parsed at once draw from
  // (serve --max-request-parse-bytes, --max-parse-bytes); made with the
  // server.
  size_t max_request_parse_bytes = size_t{64} << 20;
  std::unique_ptr<util::SharedByteBudget> parse_memory;

  // ApiError 503 shutting_down (Retry-After) once the server drains.
  void refuse_if_stopping() const;
  // The engine, or ApiError 503 (loading / shutting down).
  engine::Engine& require_engine() const;
  ParseLimits parse_limits() const;
  // The model name to echo back: the requested one when it is served (the
  // base model or a LoRA adapter), the default when none was given;
  // ApiError 404 for an unknown name.
  std::string check_model(const std::string& requested) const;
  // check_model for the endpoints that run the model: a LoRA adapter's name
  // selects that adapter (counted for /metrics); the base model's names and
  // "" select none. ApiError 404 for a name that is neither.
  struct ModelChoice {
    std::string name;  // echoed as the response's `model`
    std::shared_ptr<const model::LoraAdapter> adapter;
  };
  ModelChoice select_model(const std::string& requested) const;
  // The tokenizer, or ApiError 400 (a model without one takes token ids only).
  const tokenizer::Tokenizer& require_tokenizer(const char* param) const;
};

// prefix + 24 random hex digits ("cmpl-...", "call_...").
std::string new_response_id(const char* prefix);
uint64_t random_seed();

// POST /v1/completions and /v1/chat/completions (completions.cc).
// The request's tenant is req.tenant (set by the server from its key).
void handle_completions(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_chat_completions(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);

}  // namespace tokenmill::server
