// POST /tokenize and /detokenize, in vLLM's shape ({"prompt" | "messages"})
// and llama.cpp's ({"content"}, answered with {"id", "piece"} tokens).
#pragma once

#include "server/route_table.h"
#include "server/serving_context.h"

namespace tokenmill::server {

void add_tokenize_routes(RouteTable& routes, ServingContext& ctx);

void handle_tokenize(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_detokenize(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);

}  // namespace tokenmill::server
