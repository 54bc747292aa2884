// Embedding request bodies -> validated plain structs, before any model
// work: OpenAI's POST /v1/embeddings (also /embeddings) and llama.cpp's
// POST /embedding. Pure functions of the body and the vocabulary size, so
// they are unit-tested without a model.
//
// Every problem throws ApiError 400 with `param` naming the field, as the
// generation endpoints do (openai_request.h): malformed JSON, wrong types,
// empty inputs, too many inputs, unknown fields, an encoding_format other
// than "float" or "base64". Checks that need the model (dimensions against
// its width, an input longer than the context) happen in the handler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/openai/openai_request.h"

namespace tokenmill::server {

// OpenAI's bound on the inputs of one request.
inline constexpr size_t kMaxEmbeddingInputs = 2048;

enum class EmbeddingEncoding {
  kFloat,   // a JSON array of numbers
  kBase64,  // the float32 values, little-endian, base64 (OpenAI's "base64")
};

struct EmbeddingRequest {
  std::string model;                  // "" when absent
  std::vector<PromptInput> inputs;    // 1 .. kMaxEmbeddingInputs, none empty
  std::string input_param = "input";  // the field they came from: "input", or llama.cpp's "content"
  EmbeddingEncoding encoding = EmbeddingEncoding::kFloat;
  // Must equal the model's width when given (tokenmill does not shorten
  // embeddings): the handler checks it.
  std::optional<int64_t> dimensions;
};

// OpenAI: `input` (a string, a list of strings, a list of token ids, or a
// list of token-id lists; required), `model`, `encoding_format`,
// `dimensions`, `user` (accepted, ignored).
EmbeddingRequest parse_embedding_request(std::string_view body, const ParseLimits& limits);

// llama.cpp's /embedding: `content` (or `input`; exactly one of them) with
// the same forms as `input` above, `model`, and `embd_normalize`, accepted
// when it is 2 (L2, llama.cpp's default and the only normalisation served).
EmbeddingRequest parse_llama_embedding_request(std::string_view body, const ParseLimits& limits);

}  // namespace tokenmill::server
