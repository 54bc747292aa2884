// llama.cpp server request bodies (POST /completion, /infill) -> what the
// OpenAI completions parser reads. Only the shape is translated here: the
// prompt forms (a string, token ids, ids mixed with strings, or a list of
// those), the options that change the response (return_tokens,
// response_fields), logit_bias as [[id, bias], ...], llama.cpp's "random"
// seeds, negative temperatures (greedy) and the server defaults llama.cpp
// applies when a field is absent (temperature 0.8, top_k 40, top_p 0.95,
// min_p 0.05). Every sampling field keeps its meaning in
// parse_completion_request (openai_request.h), which also validates it.
//
// Fields of samplers tokenmill does not have (DRY, XTC, dynamic
// temperature, top-n-sigma) are accepted at their "off" value and refused
// otherwise; fields that only tune llama.cpp's scheduling or timing
// (t_max_predict_ms, n_indent, n_cache_reuse, ...) are accepted and have
// no effect (docs/api.md lists them).
//
// Pure functions of the body and a tokenizer, so they are unit-tested
// without a model. Every problem throws ApiError 400 naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/json_fields.h"
#include "server/openai/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill::server {

// llama.cpp's server defaults for fields a request leaves out.
inline constexpr double kLlamaDefaultTemperature = 0.8;
inline constexpr int kLlamaDefaultTopK = 40;
inline constexpr double kLlamaDefaultTopP = 0.95;
inline constexpr double kLlamaDefaultMinP = 0.05;

// A /completion or /infill body taken apart.
struct LlamaBody {
  // The body for parse_completion_request: the sampling fields, translated;
  // "prompt" is removed (the handler puts the tokenized prompts back).
  RequestJson sampling = RequestJson::object();
  // Each prompt as sent: a string, a list of token ids, or ids mixed with
  // strings. Empty for /infill (its "prompt" is part of InfillFields).
  std::vector<RequestJson> prompts;
  bool return_tokens = false;
  // "response_fields": keep only these fields ("a/b" lifts b out of a).
  std::vector<std::string> response_fields;
  // "id_slot" when it names a slot (>= 0): the slot the request would like.
  int id_slot = -1;
  bool stream = false;
  // "lora": the index (GET /lora-adapters) of the adapter it turns on, if any.
  std::optional<int64_t> lora_id;
};

// Splits a llama.cpp body. `infill`: the body of /infill (no prompt list
// is required; input_prefix, input_suffix and input_extra stay in
// `sampling` for take_infill_fields). `tok` turns logit_bias' string
// keys into tokens (null: a string key is refused); the default top_k is
// capped at limits.n_vocab.
LlamaBody translate_llama_body(std::string_view body, bool infill, const tokenizer::Tokenizer* tok,
                               const ParseLimits& limits);

// A prompt's tokens: text is tokenized with parse_special (special-token
// texts become those tokens, as llama.cpp does); BOS is added when
// `add_special` and the prompt is text or starts with text; ids are
// checked against the vocabulary. `tok` may be null when the prompt holds
// ids only. Throws ApiError 400 naming `param`.
std::vector<int32_t> tokenize_llama_prompt(const RequestJson& prompt, const tokenizer::Tokenizer* tok,
                                           const ParseLimits& limits, bool add_special, const std::string& param);

// Keeps only `fields` of a response object, as llama.cpp's response_fields
// does: a field named "a/b" is the member b of the object a, put at the
// top level under the key "a/b". Missing fields are left out. An empty
// list keeps everything.
nlohmann::json select_response_fields(const nlohmann::json& response, const std::vector<std::string>& fields);

}  // namespace tokenmill::server
