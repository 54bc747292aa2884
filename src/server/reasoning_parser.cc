#include "server/reasoning_parser.h"

#include "server/tools/format_scan.h"

namespace tokenmill::server {
namespace {

constexpr std::string_view kReasoningOpenTag = "<think>";
constexpr std::string_view kReasoningCloseTag = "</think>";

}  // namespace

ReasoningFormat resolve_reasoning_format(ReasoningFormat format, std::string_view template_source) {
  if (format != ReasoningFormat::kAuto) return format;
  const bool think = template_source.find(kReasoningOpenTag) != std::string_view::npos ||
                     template_source.find(kReasoningCloseTag) != std::string_view::npos;
  return think ? ReasoningFormat::kDeepSeek : ReasoningFormat::kNone;
}

bool template_opens_think(std::string_view rendered_prompt) {
  const std::string_view s = tools_internal::rstrip(rendered_prompt);
  return s.size() >= kReasoningOpenTag.size() && s.substr(s.size() - kReasoningOpenTag.size()) == kReasoningOpenTag;
}

ReasoningParser::ReasoningParser(ReasoningFormat format, bool think_open)
    : state_(format == ReasoningFormat::kNone ? State::kContent : State::kStart), prompt_opened_(think_open) {}

void ReasoningParser::emit_reasoning(ReasoningDelta& out, std::string_view text) {
  if (!reasoning_begun_)
    while (!text.empty() && tools_internal::is_space(text.front())) text.remove_prefix(1);
  if (text.empty()) return;
  reasoning_begun_ = true;
  out.reasoning += text;
}

bool ReasoningParser::step_start() {
  const size_t i = tools_internal::skip_space(buf_, 0);
  const std::string_view rest = std::string_view(buf_).substr(i);
  if (rest.substr(0, kReasoningOpenTag.size()) == kReasoningOpenTag) {
    buf_.erase(0, i + kReasoningOpenTag.size());
    state_ = State::kThink;
    return true;
  }
  if (kReasoningOpenTag.substr(0, rest.size()) == rest) return false;  // may still become <think>
  state_ = prompt_opened_ ? State::kThink : State::kContent;
  return true;
}

bool ReasoningParser::step_think(ReasoningDelta& out) {
  const size_t p = buf_.find(kReasoningCloseTag);
  if (p != std::string::npos) {
    emit_reasoning(out, tools_internal::rstrip(std::string_view(buf_).substr(0, p)));
    buf_.erase(0, p + kReasoningCloseTag.size());
    state_ = State::kAfterThink;
    return true;
  }
  size_t end = buf_.size() - tools_internal::partial_suffix(buf_, kReasoningCloseTag);
  while (end > 0 && tools_internal::is_space(buf_[end - 1])) --end;
  emit_reasoning(out, std::string_view(buf_).substr(0, end));
  buf_.erase(0, end);
  return false;
}

bool ReasoningParser::step_after_think() {
  buf_.erase(0, tools_internal::skip_space(buf_, 0));
  if (buf_.empty()) return false;
  state_ = State::kContent;
  return true;
}

ReasoningDelta ReasoningParser::feed(std::string_view text) {
  buf_ += text;
  ReasoningDelta out;
  for (bool more = true; more;) {
    switch (state_) {
      case State::kStart: more = step_start(); break;
      case State::kThink: more = step_think(out); break;
      case State::kAfterThink: more = step_after_think(); break;
      case State::kContent:
        out.content += buf_;
        buf_.clear();
        more = false;
        break;
    }
  }
  return out;
}

ReasoningDelta ReasoningParser::finish() {
  ReasoningDelta out = feed("");
  if (state_ == State::kThink) emit_reasoning(out, tools_internal::rstrip(buf_));  // never closed: reasoning to the end
  if (state_ == State::kStart && prompt_opened_) emit_reasoning(out, tools_internal::rstrip(buf_));
  if (state_ == State::kStart && !prompt_opened_) out.content += buf_;
  buf_.clear();
  return out;
}

ReasoningDelta parse_reasoning(std::string_view text, ReasoningFormat format, bool think_open) {
  ReasoningParser parser(format, think_open);
  ReasoningDelta out = parser.feed(text);
  ReasoningDelta last = parser.finish();
  out.reasoning += last.reasoning;
  out.content += last.content;
  return out;
}

}  // namespace tokenmill::server
