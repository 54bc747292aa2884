// gpt-oss's harmony messages (format_parser.h): each is a header
// (`<|start|>assistant`, `<|channel|>NAME`, an optional `to=RECIPIENT` and
// `<|constrain|>json`) then `<|message|>` and a body up to <|end|>,
// <|call|>, <|return|> or the next header. A body addressed to
// `functions.NAME` is a call with the body as arguments (other recipients
// keep their whole name, e.g. "browser.search"); the analysis channel is
// reasoning; any other body (final, a commentary preamble) is content, and
// so is text outside messages.
#include "server/tools/format_parser.h"

namespace tokenmill::server::tools_internal {
namespace {

constexpr std::string_view kHarmonyStart = "<|start|>";
constexpr std::string_view kHarmonyChannel = "<|channel|>";
constexpr std::string_view kHarmonyMessage = "<|message|>";
constexpr std::string_view kHarmonyEnd = "<|end|>";
constexpr std::string_view kHarmonyCall = "<|call|>";
constexpr std::string_view kHarmonyReturn = "<|return|>";

// The word after `key` in a header, up to whitespace or '<'.
std::string_view header_word(std::string_view header, std::string_view key) {
  const size_t k = header.find(key);
  if (k == std::string_view::npos) return {};
  size_t e = k + key.size();
  while (e < header.size() && !is_space(header[e]) && header[e] != '<') ++e;
  return header.substr(k + key.size(), e - k - key.size());
}

// The first of `words` in s from `from`: its position (npos if none) and length.
std::pair<size_t, size_t> find_first(std::string_view s, size_t from, std::initializer_list<std::string_view> words) {
  std::pair<size_t, size_t> best{std::string_view::npos, 0};
  for (std::string_view w : words)
    if (const size_t p = s.find(w, from); p < best.first) best = {p, w.size()};
  return best;
}

}  // namespace

void parse_gpt_oss(std::string_view s, SnapshotBuilder& out) {
  size_t pos = 0;
  for (;;) {
    const size_t h = find_first(s, pos, {kHarmonyStart, kHarmonyChannel}).first;
    if (h == std::string_view::npos) {
      const std::string_view tail = s.substr(pos);
      out.content(
          tail.substr(0, tail.size() - (out.final() ? 0 : partial_suffix_any(tail, {kHarmonyStart, kHarmonyChannel}))));
      return;
    }
    out.content(s.substr(pos, h - pos));
    const size_t m = s.find(kHarmonyMessage, h);
    if (m == std::string_view::npos) return;  // a header cut short is not reported
    const std::string_view header = s.substr(h, m - h);
    const size_t begin = m + kHarmonyMessage.size();
    const auto [end, end_size] =
        find_first(s, begin, {kHarmonyEnd, kHarmonyCall, kHarmonyReturn, kHarmonyStart, kHarmonyChannel});
    std::string_view body = s.substr(begin, end == std::string_view::npos ? s.npos : end - begin);
    if (end == std::string_view::npos && !out.final())
      body.remove_suffix(
          partial_suffix_any(body, {kHarmonyEnd, kHarmonyCall, kHarmonyReturn, kHarmonyStart, kHarmonyChannel}));
    std::string_view recipient = header_word(header, "to=");
    if (recipient.substr(0, 10) == "functions.") recipient.remove_prefix(10);
    if (!recipient.empty()) {
      out.begin_call(std::string(recipient));
      out.args(rstrip(body.substr(std::min(body.size(), skip_space(body, 0)))));
    } else if (header_word(header, kHarmonyChannel) == "analysis") {
      out.reasoning(body);
    } else {
      out.content(body);
    }
    if (end == std::string_view::npos) return;
    const bool terminator = s.compare(end, kHarmonyStart.size(), kHarmonyStart) != 0 &&
                            s.compare(end, kHarmonyChannel.size(), kHarmonyChannel) != 0;
    pos = terminator ? end + end_size : end;
  }
}

}  // namespace tokenmill::server::tools_internal
