#include "server/llamacpp/llamacpp_response.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tokenmill::server {

using nlohmann::json;

namespace {

// JSON has no -inf; llama.cpp reports the lowest float for a probability of 0.
double llama_finite_logprob(float lp) {
  return std::isfinite(lp) ? static_cast<double>(lp) : static_cast<double>(std::numeric_limits<float>::lowest());
}

json llama_bytes_json(std::string_view s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

json probability_entry(int32_t id, float logprob, const TokenPieceFn& piece) {
  const std::string p = piece(id);
  return {{"id", id},
          {"token", std::string(utf8_valid_prefix(p))},
          {"bytes", llama_bytes_json(p)},
          {"logprob", llama_finite_logprob(logprob)}};
}

double per_second(int64_t n, double ms) { return ms > 0 ? static_cast<double>(n) * 1000.0 / ms : 0.0; }
double per_token(double ms, int64_t n) { return n > 0 ? ms / static_cast<double>(n) : 0.0; }

}  // namespace

const std::vector<std::string>& llama_sampler_order() {
  static const std::vector<std::string> k = {"penalties", "top_k", "typ_p", "top_p", "min_p", "temperature"};
  return k;
}

LlamaStop llama_stop(const engine::GenerationResult& r, const std::vector<std::string>& stops,
                     const TokenPieceFn& piece) {
  using engine::FinishReason;
  LlamaStop out;
  switch (r.final.reason) {
    case FinishReason::kLength:
    case FinishReason::kTimeout: out.type = "limit"; return out;
    case FinishReason::kStop: break;
    default: return out;
  }
  out.type = "eos";
  if (r.final.usage.completion_tokens > static_cast<int64_t>(r.tokens.size()) || stops.empty()) return out;
  std::string raw;
  for (int32_t id : r.tokens) raw += piece(id);
  size_t best_end = std::string::npos;
  for (const std::string& s : stops) {
    const size_t at = raw.find(s);
    if (at != std::string::npos && (best_end == std::string::npos || at + s.size() < best_end)) {
      best_end = at + s.size();
      out.word = s;
    }
  }
  if (!out.word.empty()) out.type = "word";
  return out;
}

std::string_view utf8_valid_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    if (lead < 0x80)
      len = 1;
    else if ((lead >> 5) == 0x6)
      len = 2;
    else if ((lead >> 4) == 0xE)
      len = 3;
    else if ((lead >> 3) == 0x1E)
      len = 4;
    else
      break;
    if (i + len > s.size()) break;
    bool ok = true;
    for (size_t k = 1; k < len; ++k) ok = ok && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (!ok) break;
    i += len;
  }
  return s.substr(0, i);
}

json llama_piece_json(std::string_view piece) {
  if (utf8_valid_prefix(piece).size() == piece.size()) return std::string(piece);
  return llama_bytes_json(piece);
}

json llama_probabilities_json(const std::vector<int32_t>& tokens, const std::vector<engine::TokenLogprob>& logprobs,
                              const TokenPieceFn& piece) {
  json out = json::array();
  for (size_t i = 0; i < tokens.size() && i < logprobs.size(); ++i) {
    json entry = probability_entry(tokens[i], logprobs[i].logprob, piece);
    json top = json::array();
    for (const auto& [id, lp] : logprobs[i].top) top.push_back(probability_entry(id, lp, piece));
    entry["top_logprobs"] = std::move(top);
    out.push_back(std::move(entry));
  }
  return out;
}

json llama_timings_json(const engine::FinalEvent& f) {
  const int64_t cached = f.usage.cached_prompt_tokens;
  const int64_t prompt_n = std::max<int64_t>(f.usage.prompt_tokens - cached, 0);
  const int64_t predicted_n = f.usage.completion_tokens;
  const double prompt_ms = f.timings.prefill_ms;
  const double predicted_ms = f.timings.decode_ms;
  // tpot: the decode time per token after the first (which prefill made).
  const double per_token_ms = f.timings.tpot_ms > 0 ? f.timings.tpot_ms : per_token(predicted_ms, predicted_n);
  json t = {{"cache_n", cached},
            {"prompt_n", prompt_n},
            {"prompt_ms", prompt_ms},
            {"prompt_per_token_ms", per_token(prompt_ms, prompt_n)},
            {"prompt_per_second", per_second(prompt_n, prompt_ms)},
            {"predicted_n", predicted_n},
            {"predicted_ms", predicted_ms},
            {"predicted_per_token_ms", per_token_ms},
            {"predicted_per_second", per_token_ms > 0 ? 1000.0 / per_token_ms : 0.0}};
  if (f.spec.draft_tokens > 0) {
    t["draft_n"] = f.spec.draft_tokens;
    t["draft_n_accepted"] = f.spec.accepted_tokens;
  }
  return t;
}

json llama_generation_settings(const SamplingRequest& c, int64_t n_predict, int64_t n_ctx, const std::string& model) {
  const sample::SamplingParams& s = c.sampling;
  json bias = json::array();
  for (const auto& [id, b] : s.logit_bias) bias.push_back({{"bias", b}, {"token", id}});
  const bool gbnf = c.constraint && c.constraint->spec.kind == grammar::ConstraintKind::kGbnf;
  return {{"n_ctx", n_ctx},
          {"model", model},
          {"seed", c.seed_given ? s.seed : kLlamaRandomSeed},
          {"temperature", s.temperature},
          {"dynatemp_range", 0.0},
          {"dynatemp_exponent", 1.0},
          {"top_k", s.top_k},
          {"top_p", s.top_p},
          {"min_p", s.min_p},
          {"top_n_sigma", -1.0},
          {"xtc_probability", 0.0},
          {"xtc_threshold", 0.1},
          {"typical_p", s.typical_p},
          {"repeat_last_n", s.penalty_last_n},
          {"repeat_penalty", s.repetition_penalty},
          {"presence_penalty", s.presence_penalty},
          {"frequency_penalty", s.frequency_penalty},
          {"dry_multiplier", 0.0},
          {"mirostat", 0},
          {"stop", s.stop},
          {"max_tokens", n_predict},
          {"n_predict", n_predict},
          {"n_keep", c.n_keep.value_or(0)},
          {"n_discard", 0},
          {"ignore_eos", s.ignore_eos},
          {"stream", c.stream},
          {"logit_bias", bias},
          {"n_probs", c.logprobs ? c.top_logprobs : 0},
          {"min_keep", 0},
          {"grammar", gbnf ? c.constraint->spec.text : std::string()},
          {"samplers", llama_sampler_order()},
          {"speculative.n_max", c.spec_max_draft},
          {"timings_per_token", false},
          {"post_sampling_probs", false},
          {"lora", json::array()}};
}

json llama_final_json(const LlamaResponseSpec& spec, const LlamaChoice& c, const TokenPieceFn& piece) {
  const engine::GenerationResult& r = c.result;
  const engine::FinalEvent& f = r.final;
  const LlamaStop stop = llama_stop(r, spec.stops, piece);
  // Streamed: the chunks carried the text; the tail held back for a stop
  // string that never completed comes last.
  const std::string content = spec.stream ? f.text : r.text;
  const int64_t in_context = f.usage.prompt_tokens + f.usage.completion_tokens;
  json out = {{"index", c.index},
              {"content", content},
              {"tokens", spec.return_tokens && !spec.stream ? json(r.tokens) : json::array()},
              {"id_slot", c.id_slot},
              {"stop", true},
              {"model", spec.model},
              {"tokens_predicted", f.usage.completion_tokens},
              {"tokens_evaluated", f.usage.prompt_tokens},
              {"generation_settings", spec.settings},
              {"prompt", c.prompt_text},
              {"has_new_line", r.text.find('\n') != std::string::npos},
              {"truncated", spec.prompt_trimmed || (spec.n_ctx > 0 && in_context >= spec.n_ctx)},
              {"stop_type", stop.type},
              {"stopped_eos", stop.type == "eos"},
              {"stopped_word", stop.type == "word"},
              {"stopped_limit", stop.type == "limit"},
              {"stopping_word", stop.word},
              {"tokens_cached", in_context},
              {"timings", llama_timings_json(f)}};
  if (spec.probs && !spec.stream)
    out["completion_probabilities"] = llama_probabilities_json(r.tokens, r.logprobs, piece);
  return out;
}

json llama_partial_json(const LlamaResponseSpec& spec, int index, int id_slot, const engine::TokenEvent& t,
                        int64_t tokens_predicted, int64_t tokens_evaluated, const TokenPieceFn& piece) {
  json out = {{"index", index},
              {"content", t.text},
              {"tokens", json::array({t.token})},
              {"stop", false},
              {"id_slot", id_slot},
              {"tokens_predicted", tokens_predicted},
              {"tokens_evaluated", tokens_evaluated}};
  if (spec.probs && t.logprob)
    out["completion_probabilities"] = llama_probabilities_json({t.token}, {*t.logprob}, piece);
  return out;
}

}  // namespace tokenmill::server
