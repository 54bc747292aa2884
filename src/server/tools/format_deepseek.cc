// DeepSeek V3 / R1 and V3.1 tool calls (format_parser.h). The markers are
// written with U+FF5C (fullwidth vertical line) and U+2581 (lower one
// eighth block), as in the models' tokenizers:
//   V3, R1:  <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>
//   V3.1:    <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>
// inside <｜tool▁calls▁begin｜> ... <｜tool▁calls▁end｜>.
#include "server/tools/format_parser.h"

namespace tokenmill::server::tools_internal {
namespace {

constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDsCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDsCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDsCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDsSep = "<｜tool▁sep｜>";

bool is_call_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (char c : name)
    if (!is_name_char(c)) return false;
  return true;
}

// One call after <｜tool▁call▁begin｜> at s[i].
RegionScan deepseek_call(std::string_view s, size_t i, SnapshotBuilder& out) {
  const size_t sep = s.find(kDsSep, i);
  if (sep == std::string_view::npos)
    return {s.size() - i > kMaxNameBytes + kDsSep.size() ? Scan::kBad : Scan::kMore, i};
  std::string_view name = strip(s.substr(i, sep - i));
  size_t j = sep + kDsSep.size();
  bool fenced = false;
  if (name == "function") {  // V3 / R1: the name is on the line after the separator
    const size_t nl = s.find('\n', j);
    if (nl == std::string_view::npos) return {s.size() - j > kMaxNameBytes ? Scan::kBad : Scan::kMore, j};
    name = strip(s.substr(j, nl - j));
    j = skip_space(s, nl + 1);
    const Scan fence = match_word(s, j, "```");
    if (fence == Scan::kMore || (fence == Scan::kDone && match_word(s, j, "json") == Scan::kMore))
      return {Scan::kMore, s.size()};
    fenced = fence == Scan::kDone;
  }
  if (!is_call_name(name)) return {Scan::kBad, i};
  const JsonValueScan v = scan_json_value(s, j, out.memo());
  if (v.status == Scan::kBad) return {Scan::kBad, i};
  if (v.begin == s.size()) return {Scan::kMore, s.size()};  // a call counts once its arguments begin
  out.begin_call(std::string(name));
  report_args(s, v.begin, v.end, v.status == Scan::kDone, out);
  if (v.status != Scan::kDone) return {Scan::kMore, s.size()};
  RegionScan r{Scan::kDone, v.end};
  if (fenced) r = close_with(s, "```", r);
  if (r.status != Scan::kDone) return r;
  size_t k = skip_space(s, r.end);
  const Scan m = match_word(s, k, kDsCallEnd);
  return {m, m == Scan::kMore ? s.size() : m == Scan::kDone ? k : r.end};
}

RegionScan deepseek_region(std::string_view s, std::string_view opener, size_t i, SnapshotBuilder& out) {
  bool in_call = opener == kDsCallBegin;
  for (bool first = true;; first = false) {
    if (!in_call) {
      i = skip_space(s, i);
      const Scan m = match_word(s, i, kDsCallBegin);
      if (m == Scan::kMore) return {Scan::kMore, s.size()};
      if (m == Scan::kBad) {
        if (first) return {Scan::kBad, i};
        const Scan end = match_word(s, i, kDsCallsEnd);
        return {end, end == Scan::kMore ? s.size() : i};
      }
    }
    in_call = false;
    const RegionScan r = deepseek_call(s, i, out);
    if (r.status != Scan::kDone) return r;
    i = r.end;
  }
}

}  // namespace

void parse_deepseek_v3(std::string_view text, SnapshotBuilder& out) {
  scan_with_openers(text, 0, {kDsCallsBegin, kDsCallBegin}, deepseek_region, out);
}

}  // namespace tokenmill::server::tools_internal
