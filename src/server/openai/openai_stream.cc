#include "server/openai/openai_stream.h"

namespace tokenmill::server {

using nlohmann::json;

OpenAiStream::OpenAiStream(StreamSpec spec, size_t num_choices, TokenPieceFn piece)
    : spec_(std::move(spec)), piece_(std::move(piece)), choices_(num_choices) {
  for (size_t i = 0; i < choices_.size(); ++i) {
    choices_[i].parser = ToolCallParser(spec_.tool_format);
    const size_t p = i / static_cast<size_t>(spec_.n);
    if (p < spec_.echo_texts.size()) choices_[i].offset = static_cast<int64_t>(spec_.echo_texts[p].size());
  }
}

json OpenAiStream::chat_delta(size_t i, const std::string& text, bool last) {
  if (!spec_.tool_calls) {
    json delta = json::object();
    if (!text.empty()) delta["content"] = text;
    return delta;
  }
  Choice& c = choices_[i];
  ParsedOutput piece = c.parser.feed(text);
  if (last) piece.append(c.parser.finish());
  while (c.call_ids.size() < static_cast<size_t>(c.parser.num_calls())) c.call_ids.push_back(new_response_id("call_"));
  return tool_delta_json(piece, c.call_ids);
}

json OpenAiStream::chunk(size_t i, const std::string& text, const json& logprobs,
                         const std::optional<std::string>& finish, bool last) {
  const int index = static_cast<int>(i);
  if (spec_.kind == ApiKind::kCompletion)
    return completion_chunk(spec_.meta, index, text, logprobs, finish, spec_.include_usage);
  return chat_chunk(spec_.meta, index, chat_delta(i, text, last), logprobs, finish, spec_.include_usage);
}

std::string OpenAiStream::preamble() {
  std::string out;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const size_t p = i / static_cast<size_t>(spec_.n);
    if (spec_.kind == ApiKind::kChat) {
      const json delta = {{"role", "assistant"}, {"content", ""}};
      out += sse_event(chat_chunk(spec_.meta, static_cast<int>(i), delta, nullptr, std::nullopt, spec_.include_usage));
    } else if (p < spec_.echo_texts.size() && !spec_.echo_texts[p].empty() && spec_.echo_prompts.empty()) {
      out += sse_event(chunk(i, spec_.echo_texts[p], nullptr, std::nullopt));
    }
  }
  return out;
}

std::string OpenAiStream::scored_echo(size_t i, const std::vector<engine::TokenLogprob>& prompt_logprobs) {
  Choice& c = choices_[i];
  if (spec_.echo_prompts.empty() || c.echoed) return {};
  c.echoed = true;
  const size_t p = i / static_cast<size_t>(spec_.n);
  const json logprobs = prompt_logprobs_json(spec_.echo_prompts[p], prompt_logprobs, piece_);
  c.offset = pieces_size(spec_.echo_prompts[p], piece_);
  return sse_event(chunk(i, p < spec_.echo_texts.size() ? spec_.echo_texts[p] : "", logprobs, std::nullopt));
}

std::string OpenAiStream::on_token(size_t i, const engine::TokenEvent& t) {
  std::string out = scored_echo(i, t.prompt_logprobs);
  json logprobs = nullptr;
  if (spec_.logprobs && t.logprob) {
    const std::vector<int32_t> ids = {t.token};
    const std::vector<engine::TokenLogprob> lps = {*t.logprob};
    logprobs = spec_.kind == ApiKind::kCompletion ? completion_logprobs_json(ids, lps, choices_[i].offset, piece_)
                                                  : chat_logprobs_json(ids, lps, piece_);
    choices_[i].offset += static_cast<int64_t>(piece_(t.token).size());
  }
  // Text held back for a possible stop string (or a possible tool call)
  // arrives later; an empty chunk would carry nothing.
  if (t.text.empty() && logprobs.is_null()) return out;
  const json c = chunk(i, t.text, logprobs, std::nullopt);
  const json& choice = c["choices"][0];
  const bool empty = spec_.kind == ApiKind::kChat ? choice["delta"].empty() : t.text.empty();
  if (empty && logprobs.is_null()) return out;
  return out + sse_event(c);
}

std::string OpenAiStream::on_final(size_t i, const engine::FinalEvent& f) {
  std::string out = scored_echo(i, f.prompt_logprobs);
  json last = chunk(i, f.text, nullptr, finish_reason_text(f.reason), /*last=*/true);
  if (spec_.tool_calls && choices_[i].parser.num_calls() > 0 && f.reason == engine::FinishReason::kStop)
    last["choices"][0]["finish_reason"] = "tool_calls";
  last["timings"] = timings_json(f.timings, f.usage, f.spec);  // extension: per choice, as it ends
  return out + sse_event(last);
}

std::string OpenAiStream::epilogue(std::span<const engine::FinalEvent> finals, bool failed) {
  std::string out;
  if (spec_.include_usage && !failed && !finals.empty()) {
    const char* object = spec_.kind == ApiKind::kCompletion ? "text_completion" : "chat.completion.chunk";
    const json timings = timings_json(finals[0].timings, finals[0].usage, finals[0].spec);
    out += sse_event(usage_chunk(spec_.meta, object, usage_json(total_usage(finals, spec_.n)), timings));
  }
  return out + std::string(kSseDone);
}

}  // namespace tokenmill::server
