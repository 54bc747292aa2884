#include "server/api_rooms.h"

#include "server/admin/lora_endpoints.h"
#include "server/llamacpp/llamacpp_api.h"
#include "server/openai/openai_routes.h"
#include "server/tokenize_endpoints.h"

namespace tokenmill::server {

void add_api_routes(RouteTable& routes, ServingContext& ctx) {
  add_openai_routes(routes, ctx);    // /v1/completions, /v1/chat/completions, /v1/embeddings, /v1/models
  add_llamacpp_routes(routes, ctx);  // /completion, /infill, /props, /slots, /embedding, /lora-adapters
  add_tokenize_routes(routes, ctx);  // /tokenize, /detokenize (vLLM's and llama.cpp's shapes)
  add_lora_routes(routes, ctx);      // /v1/load_lora_adapter, /v1/unload_lora_adapter
}

}  // namespace tokenmill::server
