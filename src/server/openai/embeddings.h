// The embedding endpoints: OpenAI's POST /v1/embeddings (also served as
// /embeddings) and llama.cpp's POST /embedding. Each input becomes one
// engine request (GenerateRequest::embedding, pooled as the server's
// --pooling says); a request's inputs are submitted together, so they
// share engine steps with each other and with generation requests.
//
// Thread-safety: handlers run on HTTP worker threads, like the completion
// handlers; the engine is the only shared state.
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/http_types.h"
#include "server/openai/embeddings_request.h"
#include "server/serving_context.h"

namespace tokenmill::server {

void handle_embeddings(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_llama_embedding(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);

// The float32 values as OpenAI's "base64" encoding: their little-endian
// bytes, base64 (RFC 4648, with padding), whatever the host's byte order.
std::string embedding_base64(std::span<const float> values);

// One vector as a JSON array of numbers, each written with the fewest
// digits that read back as the same float32.
nlohmann::json embedding_json(std::span<const float> values);

// {"object": "list", "data": [{"object": "embedding", "index": i,
// "embedding": ...}], "model": ..., "usage": {"prompt_tokens": N,
// "total_tokens": N}}.
nlohmann::json embeddings_response(const std::vector<std::vector<float>>& vectors, EmbeddingEncoding encoding,
                                   const std::string& model, int64_t prompt_tokens);

// llama.cpp's /embedding answer: [{"index": i, "embedding": [[...]]}] (one
// pooled vector per input, inside a list as llama.cpp writes it).
nlohmann::json llama_embedding_response(const std::vector<std::vector<float>>& vectors);

}  // namespace tokenmill::server
