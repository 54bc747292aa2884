// The OpenAI room's routes: /v1/completions, /v1/chat/completions,
// /v1/embeddings, /v1/models and /v1/models/{id}, and the same without /v1
// as llama-server also serves them.
#pragma once

#include "server/route_table.h"
#include "server/serving_context.h"

namespace tokenmill::server {

void add_openai_routes(RouteTable& routes, ServingContext& ctx);

// GET /v1/models (the served names and the loaded LoRA adapters) and
// GET /v1/models/{id}.
void handle_models(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);

}  // namespace tokenmill::server
