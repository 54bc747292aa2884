// Engine results -> llama.cpp server response bodies (POST /completion,
// /infill): the final object (content, tokens, stop_type and the older
// stopped_eos / stopped_word / stopped_limit, stopping_word, token counts,
// generation_settings, timings, completion_probabilities) and the streamed
// partial chunks ({"content", "tokens", "stop": false, ...}).
// Pure functions of their inputs (a token's bytes come from a callback), so
// they are unit-tested without a model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/output_stream.h"
#include "server/openai/openai_request.h"
#include "server/openai/openai_response.h"

namespace tokenmill::server {

// llama.cpp reports its "random seed" sentinel for a request without one.
inline constexpr uint64_t kLlamaRandomSeed = 0xFFFFFFFFu;

// The sampler order tokenmill applies (sample/sampler.cc), in llama.cpp's
// sampler names.
const std::vector<std::string>& llama_sampler_order();

// Why a choice ended, in llama.cpp's terms: "eos" (an end-of-generation
// token, or a grammar that must end), "word" (a stop string, named in
// `word`), "limit" (n_predict, the context, or the deadline), "none".
struct LlamaStop {
  std::string type = "none";
  std::string word;
};
// `stops`: the request's stop strings. An EOS is counted in
// usage.completion_tokens but streams no token, which tells it from a stop
// string; the stop string is the one the generated tokens' text completes
// first.
LlamaStop llama_stop(const engine::GenerationResult& r, const std::vector<std::string>& stops,
                     const TokenPieceFn& piece);

// The longest prefix of `s` that is whole UTF-8 characters.
std::string_view utf8_valid_prefix(std::string_view s);
// A token's piece as llama.cpp's /tokenize shows it: the text when it is
// valid UTF-8, else the list of its bytes.
nlohmann::json llama_piece_json(std::string_view piece);

// completion_probabilities: one {"id", "token", "bytes", "logprob",
// "top_logprobs": [{"id", "token", "bytes", "logprob"}]} per token.
// Precondition: tokens.size() == logprobs.size().
nlohmann::json llama_probabilities_json(const std::vector<int32_t>& tokens,
                                        const std::vector<engine::TokenLogprob>& logprobs, const TokenPieceFn& piece);

// {"cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms",
//  "prompt_per_second", "predicted_n", "predicted_ms",
//  "predicted_per_token_ms", "predicted_per_second"} (+ "draft_n",
// "draft_n_accepted" with speculative decoding). prompt_n counts the prompt
// tokens computed (cache_n came from the prefix cache); predicted_ms runs
// from the first generated token to the last.
nlohmann::json llama_timings_json(const engine::FinalEvent& f);

// generation_settings for a parsed request: the sampling values it runs
// with, n_predict (the completion tokens allowed), n_ctx and the model.
// Samplers tokenmill lacks are reported off.
nlohmann::json llama_generation_settings(const SamplingRequest& c, int64_t n_predict, int64_t n_ctx,
                                         const std::string& model);

// What every choice of one response shares.
struct LlamaResponseSpec {
  std::string model;
  nlohmann::json settings;         // llama_generation_settings
  std::vector<std::string> stops;  // the request's stop strings
  int64_t n_ctx = 0;
  bool return_tokens = false;
  bool probs = false;  // n_probs > 0: completion_probabilities
  bool stream = false;
  bool prompt_trimmed = false;      // /infill left context out to fit: "truncated"
  std::vector<std::string> fields;  // response_fields (select_response_fields)
};

// One choice of a response.
struct LlamaChoice {
  int index = 0;
  int id_slot = -1;
  std::string prompt_text;  // the prompt as the model saw it (special tokens included)
  engine::GenerationResult result;
};

// The final object: the whole answer, or the last chunk of a stream (then
// content is the text not streamed yet, tokens is empty and the
// probabilities went with the chunks).
nlohmann::json llama_final_json(const LlamaResponseSpec& spec, const LlamaChoice& c, const TokenPieceFn& piece);

// A streamed chunk for one token event: {"index", "content", "tokens":
// [id], "stop": false, "id_slot", "tokens_predicted", "tokens_evaluated"}
// (+ completion_probabilities for the token when spec.probs).
nlohmann::json llama_partial_json(const LlamaResponseSpec& spec, int index, int id_slot, const engine::TokenEvent& t,
                                  int64_t tokens_predicted, int64_t tokens_evaluated, const TokenPieceFn& piece);

}  // namespace tokenmill::server
