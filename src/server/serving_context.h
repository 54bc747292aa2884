// What the generation handlers need from the server: the engine (once
// loaded), the tokenizer, the chat template, the served model names, the
// HTTP counters and a few timing knobs. Owned by HttpServer; immutable
// after attach_engine() except through the engine's own thread-safe API.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <httplib.h>

#include "engine/engine.h"
#include "grammar/grammar_compiler.h"
#include "server/chat_prompt.h"
#include "server/http_stats.h"
#include "server/openai_request.h"

namespace tokenmill::server {

enum class ServerState { kLoading, kReady, kStopping };

struct ServingContext {
  std::atomic<engine::Engine*> engine{nullptr};  // null while loading
  std::atomic<ServerState> state{ServerState::kLoading};
  const tokenizer::Tokenizer* tokenizer = nullptr;
  std::optional<ChatFormat> chat;
  // Compiles output constraints and tool grammars against the tokenizer's
  // vocabulary (thread-safe); null when the model has no tokenizer.
  std::unique_ptr<grammar::GrammarCompiler> grammar_compiler;
  std::vector<std::string> model_names;  // [0] is the id /v1/models reports
  int64_t created = 0;                   // Unix seconds, reported as the model's "created"
  HttpStats stats;
  // How long a streaming request waits for its first event before the 200
  // headers go out (a refusal after that arrives as an error event).
  std::chrono::milliseconds first_event_wait{2000};
  // A stream that has nothing to send for this long writes an SSE comment,
  // which is also how a client that went away is noticed.
  std::chrono::milliseconds keep_alive{500};

  // The engine, or ApiError 503 (loading / shutting down).
  engine::Engine& require_engine() const;
  ParseLimits parse_limits() const;
  // The model name to echo back: the requested one when it is served, the
  // default when none was given; ApiError 404 for an unknown name.
  std::string check_model(const std::string& requested) const;
  // The tokenizer, or ApiError 400 (a model without one takes token ids only).
  const tokenizer::Tokenizer& require_tokenizer(const char* param) const;
};

// The X-Tenant header (empty when absent); ApiError 400 when it is longer
// than 256 bytes or holds control characters.
std::string tenant_of(const httplib::Request& req);

// prefix + 24 random hex digits ("cmpl-...", "call_...").
std::string new_response_id(const char* prefix);
uint64_t random_seed();

// POST /v1/completions and /v1/chat/completions (completions.cc).
void handle_completions(ServingContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_chat_completions(ServingContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace tokenmill::server
