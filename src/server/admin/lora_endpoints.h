// The HTTP side of LoRA adapters (docs/api.md, "LoRA adapters"):
//   POST /v1/load_lora_adapter   {"lora_name": ..., "lora_path": ...}  (vLLM's)
//   POST /v1/unload_lora_adapter {"lora_name": ...}
//   GET  /lora-adapters          [{"id", "path", "scale"}]             (llama.cpp's)
// and the model card GET /v1/models shows for an adapter. The runtime
// endpoints answer 403 unless the server runs with --allow-runtime-lora:
// loading by path reads files on the server's machine.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/http_types.h"
#include "server/lora_registry.h"
#include "server/route_table.h"
#include "server/serving_context.h"

namespace tokenmill::server {

struct LoraLoadRequest {
  std::string name;
  std::string path;
};

// The bodies of the two runtime endpoints. ApiError 400 naming the field
// for a missing or non-string field, an unknown field, or vLLM's
// load_inplace: true (unload, then load).
LoraLoadRequest parse_load_lora_request(std::string_view body, const util::JsonLimits& limits = {});
std::string parse_unload_lora_request(std::string_view body, const util::JsonLimits& limits = {});

// POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's).
void add_lora_routes(RouteTable& routes, ServingContext& ctx);

void handle_load_lora_adapter(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_unload_lora_adapter(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_llama_lora_adapters(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);

// `base_card` (the base model's /v1/models entry under the adapter's id)
// with vLLM's "parent" (the base model's id) and "root" (the adapter's
// file), and the adapter's rank.
nlohmann::json lora_model_card(nlohmann::json base_card, const LoraEntry& adapter, const std::string& parent);

}  // namespace tokenmill::server
