#include "http/http_stats.h"

#include <array>
#include <string_view>

namespace tokenmill::http {

void HttpStats::on_response(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++s_.responses[{endpoint, status}];
}

void HttpStats::on_disconnect() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++s_.client_disconnects;
}

void HttpStats::on_auth_failure() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++s_.auth_failures;
}

void HttpStats::on_backpressure_pause() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++s_.backpressure_pauses;
}

void HttpStats::on_stalled_client() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++s_.stalled_clients;
}

void HttpStats::add_in_flight(int64_t delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  s_.in_flight += delta;
}

int64_t HttpStats::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return s_.in_flight;
}

HttpStatsSnapshot HttpStats::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return s_;
}

std::string endpoint_label(const std::string& path) {
  static constexpr std::array<std::string_view, 24> kKnown = {
      "/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics", "/tokenize", "/detokenize", "/",
      "/v1/embeddings", "/embeddings", "/embedding", "/v1/load_lora_adapter", "/v1/unload_lora_adapter",
      // llama.cpp's routes (llamacpp_api.h)
      "/completion", "/infill", "/props", "/slots", "/completions", "/chat/completions", "/models", "/v1/health",
      "/lora-adapters",
      // the web console's JSON (src/console/)
      "/console/api/status", "/console/api/ticket"};
  for (std::string_view k : kKnown)
    if (path == k) return path;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  if (path.rfind("/console/", 0) == 0) return "/console/{asset}";
  return "other";
}

}  // namespace tokenmill::http
