#include "server/serving_context.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "server/api_error.h"

namespace tokenmill::server {

void ServingContext::refuse_if_stopping() const {
  if (state.load() == ServerState::kStopping)
    throw ApiError(503, "the server is shutting down", "service_unavailable", std::nullopt, "shutting_down")
        .with_retry_after(5);
}

engine::Engine& ServingContext::require_engine() const {
  refuse_if_stopping();
  engine::Engine* e = engine.load();
  if (!e)
    throw ApiError(503, "the model is still loading", "service_unavailable", std::nullopt, "loading")
        .with_retry_after(1);
  return *e;
}

std::chrono::steady_clock::time_point ServingContext::first_event_deadline(const engine::Engine& e) const {
  const engine::SloTargets& slo = e.config().slo;
  // The refusal comes by the target at the latest (the forecast includes
  // the time already waited); a second on top covers one long step.
  const double refusable_ms = std::max(slo.ttft_ms, slo.e2e_ms);
  const auto wait = refusable_ms > 0 ? std::max(first_event_wait,
                                                std::chrono::milliseconds(static_cast<int64_t>(refusable_ms) + 1000))
                                     : first_event_wait;
  return std::chrono::steady_clock::now() + wait;
}

ParseLimits ServingContext::parse_limits() const {
  ParseLimits l;
  if (const engine::Engine* e = engine.load()) l.n_vocab = e->limits().n_vocab;
  l.json.max_bytes = max_request_parse_bytes;
  l.json.shared = parse_memory.get();
  return l;
}

std::string ServingContext::check_model(const std::string& requested) const {
  if (requested.empty()) return model_names.empty() ? std::string("default") : model_names[0];
  for (const std::string& name : model_names)
    if (requested == name) return requested;
  if (loras && loras->find(requested)) return requested;
  std::vector<std::string> served = model_names;
  if (loras)
    for (const LoraEntry& e : loras->list()) served.push_back(e.name);
  throw ApiError(404,
                 fmt::format("The model '{}' does not exist; this server serves '{}' (see GET /v1/models)", requested,
                             fmt::join(served, "', '")),
                 "invalid_request_error", "model", "model_not_found");
}

ServingContext::ModelChoice ServingContext::select_model(const std::string& requested) const {
  const bool base_name =
      requested.empty() || std::find(model_names.begin(), model_names.end(), requested) != model_names.end();
  if (!base_name && loras) {
    // Held by the request from here on: an unload after this point drains.
    if (std::shared_ptr<const model::LoraAdapter> adapter = loras->find(requested)) {
      loras->count_request(requested);
      return ModelChoice{requested, std::move(adapter)};
    }
  }
  return ModelChoice{check_model(requested), nullptr};
}

const tokenizer::Tokenizer& ServingContext::require_tokenizer(const char* param) const {
  if (!tokenizer) bad_request(param, "the model has no tokenizer; send the prompt as token ids");
  return *tokenizer;
}

namespace {

std::mt19937_64& rng() {
  thread_local std::mt19937_64 gen([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }());
  return gen;
}

}  // namespace

std::string new_response_id(const char* prefix) {
  return fmt::format("{}{:016x}{:08x}", prefix, rng()(), static_cast<uint32_t>(rng()()));
}

uint64_t random_seed() { return rng()(); }

}  // namespace tokenmill::server
