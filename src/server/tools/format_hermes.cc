#include <nlohmann/json.hpp>

#include "server/tools/format_parser.h"
#include "server/tools/format_scan.h"
#include "server/tools/tool_prompt.h"

namespace tokenmill::server::tools_internal {
namespace {

// A header longer than this is not one the grammar produces (names are at
// most 64 bytes): the text is content.
constexpr size_t kHermesMaxHeaderBytes = 1024;

enum class HermesMatch { kYes, kMore, kNo };

struct HermesHeaderMatch {
  HermesMatch match = HermesMatch::kNo;
  size_t end = 0;  // kYes: bytes the header took
  std::string name;
};

// Matches ws '{' ws "\"name\"" ws ':' ws STRING ws ',' ws "\"arguments\"" ws ':'
// at the start of `s` (what follows `<tool_call>`).
class HermesHeaderMatcher {
 public:
  explicit HermesHeaderMatcher(std::string_view s) : s_(s) {}

  HermesHeaderMatch run() {
    for (std::string_view word : {"{", "\"name\"", ":"})
      if (HermesMatch m = literal(word); m != HermesMatch::kYes) return {m, 0, {}};
    HermesHeaderMatch out;
    if (HermesMatch m = string(out.name); m != HermesMatch::kYes) return {m, 0, {}};
    if (out.name.empty()) return {HermesMatch::kNo, 0, {}};  // a call needs a name
    for (std::string_view word : {",", "\"arguments\"", ":"})
      if (HermesMatch m = literal(word); m != HermesMatch::kYes) return {m, 0, {}};
    out.match = HermesMatch::kYes;
    out.end = i_;
    return out;
  }

 private:
  HermesMatch literal(std::string_view word) {
    while (i_ < s_.size() && is_space(s_[i_])) ++i_;
    const size_t n = std::min(word.size(), s_.size() - i_);
    if (s_.substr(i_, n) != word.substr(0, n)) return HermesMatch::kNo;
    if (n < word.size()) return HermesMatch::kMore;
    i_ += n;
    return HermesMatch::kYes;
  }

  // A JSON string, decoded into `out`.
  HermesMatch string(std::string& out) {
    while (i_ < s_.size() && is_space(s_[i_])) ++i_;
    if (i_ == s_.size()) return HermesMatch::kMore;
    if (s_[i_] != '"') return HermesMatch::kNo;
    for (size_t j = i_ + 1; j < s_.size(); ++j) {
      if (static_cast<unsigned char>(s_[j]) < 0x20) return HermesMatch::kNo;
      if (s_[j] == '\\') {
        ++j;
        continue;
      }
      if (s_[j] != '"') continue;
      const nlohmann::json v = nlohmann::json::parse(s_.substr(i_, j + 1 - i_), nullptr, /*allow_exceptions=*/false);
      if (!v.is_string()) return HermesMatch::kNo;
      out = v.get<std::string>();
      i_ = j + 1;
      return HermesMatch::kYes;
    }
    return HermesMatch::kMore;
  }

  std::string_view s_;
  size_t i_ = 0;
};

// The original incremental parser of the Hermes format (see
// tool_call_parser.h); linear in the text.
class HermesParser final : public FormatParser {
 public:
  ParsedOutput feed(std::string_view text) override;
  ParsedOutput finish() override;
  int num_calls() const override { return num_calls_; }

 private:
  enum class State { kText, kHeader, kArgs };

  // Each returns false when it needs more text.
  bool step_text(ParsedOutput& out);
  bool step_header(ParsedOutput& out);
  bool step_args(ParsedOutput& out);
  void emit_content(ParsedOutput& out, std::string_view text);
  void emit_args(ParsedOutput& out, std::string_view text);
  // Ends the current call at buf_[tag_at] (its closing tag); returns true.
  bool end_call(size_t tag_at);

  State state_ = State::kText;
  std::string buf_;  // text received and not yet reported
  // kHeader: the whitespace before the tag, content again if no call follows.
  std::string space_before_tag_;
  int num_calls_ = 0;
  bool after_call_ = false;  // no content reported since the last call ended
  bool args_begun_ = false;  // the current call reported a non-space byte of ARGS
  JsonLexer lex_;            // the lexer's state at buf_[0] (kArgs)
};

}  // namespace

void HermesParser::emit_content(ParsedOutput& out, std::string_view text) {
  if (after_call_) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    after_call_ = false;
  }
  out.content += text;
}

void HermesParser::emit_args(ParsedOutput& out, std::string_view text) {
  if (!args_begun_)
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  if (text.empty()) return;
  args_begun_ = true;
  const int index = num_calls_ - 1;
  if (!out.calls.empty() && out.calls.back().index == index) {
    out.calls.back().arguments += text;
  } else {
    out.calls.push_back({index, "", std::string(text)});
  }
}

bool HermesParser::step_text(ParsedOutput& out) {
  const size_t p = buf_.find(kToolCallOpen);
  if (p != std::string::npos) {
    const std::string_view before = rstrip(std::string_view(buf_).substr(0, p));
    emit_content(out, before);
    space_before_tag_ = buf_.substr(before.size(), p - before.size());
    buf_.erase(0, p + kToolCallOpen.size());
    state_ = State::kHeader;
    return true;
  }
  // Hold back what may still become "<tool_call>", and trailing whitespace
  // (dropped if a call follows).
  size_t end = buf_.size() - partial_suffix(buf_, kToolCallOpen);
  while (end > 0 && is_space(buf_[end - 1])) --end;
  emit_content(out, std::string_view(buf_).substr(0, end));
  buf_.erase(0, end);
  return false;
}

bool HermesParser::step_header(ParsedOutput& out) {
  HermesHeaderMatch m = HermesHeaderMatcher(buf_).run();
  if (m.match == HermesMatch::kMore && buf_.size() <= kHermesMaxHeaderBytes) return false;
  if (m.match != HermesMatch::kYes) {  // not a call after all: the tag is content
    emit_content(out, space_before_tag_ + std::string(kToolCallOpen));
    state_ = State::kText;
    return true;
  }
  out.calls.push_back({num_calls_, std::move(m.name), ""});
  ++num_calls_;
  buf_.erase(0, m.end);
  args_begun_ = false;
  lex_ = {};
  state_ = State::kArgs;
  return true;
}

bool HermesParser::end_call(size_t tag_at) {
  buf_.erase(0, tag_at + kToolCallClose.size());
  lex_ = {};
  after_call_ = true;
  state_ = State::kText;
  return true;
}

bool HermesParser::step_args(ParsedOutput& out) {
  // An object or array argument ends where its brackets balance; the
  // closing tag counts only outside JSON strings (an argument may well hold
  // the text "</tool_call>").
  JsonLexer lex = lex_;
  size_t j = 0;
  for (; j < buf_.size() && !lex.closed; ++j) {
    if (!lex.in_string && buf_.compare(j, kToolCallClose.size(), kToolCallClose) == 0) break;
    lex.step(buf_[j]);
  }
  if (lex.closed) {  // ARGS is buf_[0, j); the rest is the wrapper
    emit_args(out, std::string_view(buf_).substr(0, j));
    buf_.erase(0, j);
    lex_ = lex;
    const size_t tag = buf_.find(kToolCallClose);
    return tag != std::string::npos && end_call(tag);
  }
  if (j < buf_.size()) {  // the tag, after a scalar (or malformed) argument
    std::string_view args = rstrip(std::string_view(buf_).substr(0, j));
    // The wrapper's '}', when the brackets are balanced (as streaming held
    // it back only then).
    if (lex.depth == 0 && !args.empty() && args.back() == '}') args.remove_suffix(1);
    emit_args(out, rstrip(args));
    return end_call(j);
  }
  // Outside strings, a start of "</tool_call>" and whitespace wait (the
  // tag ends the call at any depth, and the arguments are trimmed before
  // it); a scalar argument may also be followed by the wrapper: ws '}' ws
  // waits too until it is clear.
  size_t end = buf_.size();
  if (!lex.in_string) {
    end -= partial_suffix(buf_, kToolCallClose);
    while (end > 0 && is_space(buf_[end - 1])) --end;
  }
  if (lex.depth == 0 && !lex.in_string) {
    if (end > 0 && buf_[end - 1] == '}') --end;
    while (end > 0 && is_space(buf_[end - 1])) --end;
  }
  for (size_t k = 0; k < end; ++k) lex_.step(buf_[k]);
  emit_args(out, std::string_view(buf_).substr(0, end));
  buf_.erase(0, end);
  return false;
}

ParsedOutput HermesParser::feed(std::string_view text) {
  buf_ += text;
  ParsedOutput out;
  for (bool more = true; more;) {
    switch (state_) {
      case State::kText: more = step_text(out); break;
      case State::kHeader: more = step_header(out); break;
      case State::kArgs: more = step_args(out); break;
    }
  }
  return out;
}

ParsedOutput HermesParser::finish() {
  ParsedOutput out = feed("");
  switch (state_) {
    case State::kText:
      // Plain text keeps its trailing whitespace; after calls it is dropped.
      emit_content(out, num_calls_ > 0 ? rstrip(buf_) : std::string_view(buf_));
      break;
    case State::kHeader:
      // Cut inside a call's header: the call has no name yet, so it cannot
      // be reported as one, and its syntax must not surface as content.
      if (HermesHeaderMatcher(buf_).run().match == HermesMatch::kNo)
        emit_content(out, space_before_tag_ + std::string(kToolCallOpen) + buf_);
      break;
    case State::kArgs:  // cut short: the arguments as far as they were written
      if (!lex_.closed) emit_args(out, buf_);
      break;
  }
  buf_.clear();
  state_ = State::kText;
  return out;
}

std::unique_ptr<FormatParser> make_hermes_parser() { return std::make_unique<HermesParser>(); }

}  // namespace tokenmill::server::tools_internal
