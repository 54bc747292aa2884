// The formats whose calls are tagged with the function's name: Qwen3-Coder
// (XML parameters) and Functionary v3.1 / v3.2 (format_parser.h).
#include <nlohmann/json.hpp>

#include "server/tools/format_parser.h"
#include "server/tools/tool_prompt.h"

namespace tokenmill::server::tools_internal {
namespace {

constexpr std::string_view kQcParamOpen = "<parameter=";
constexpr std::string_view kQcParamClose = "</parameter>";
constexpr std::string_view kQcFunctionOpen = "<function=";
constexpr std::string_view kQcFunctionClose = "</function>";

// A name at s[i] up to `stop`; j ends past `stop`.
Scan tagged_name(std::string_view s, size_t& j, char stop, std::string& name) {
  const size_t i = j;
  while (j < s.size() && is_name_char(s[j]) && j - i <= kMaxNameBytes) ++j;
  if (j == s.size()) return Scan::kMore;
  if (j == i || j - i > kMaxNameBytes || s[j] != stop) return Scan::kBad;
  name = s.substr(i, j - i);
  ++j;
  return Scan::kDone;
}

// Values whose first byte may begin JSON wait for their end: they are
// reported as written when they are JSON, else as a JSON string. Any other
// value is a JSON string, streamed as it comes.
bool may_be_json(std::string_view value) {
  return !value.empty() && std::string_view("{[\"-0123456789tfn").find(value[0]) != std::string_view::npos;
}

// A complete value s[v, v + n) as JSON text.
std::string parameter_json(std::string_view s, size_t v, size_t n, ScanMemo* memo) {
  const std::string_view value = s.substr(v, n);
  if (may_be_json(value) && nlohmann::json::accept(strip(value))) return std::string(strip(value));
  return "\"" + escape_memo(s, v, n, memo) + "\"";
}

// One parameter's value from s[v] (after `<parameter=KEY>`): appended to
// `args` (a streamed string value without its closing quote while open);
// kMore while open. One newline is dropped on each side of the value.
Scan qwen_parameter_value(std::string_view s, size_t& v, SnapshotBuilder& out, std::string& args) {
  const bool final = out.final();
  if (v < s.size() && s[v] == '\n') ++v;
  const size_t close = find_memo(s, kQcParamClose, v, out.memo());
  std::string_view value = s.substr(v, close == std::string_view::npos ? s.npos : close - v);
  if (close == std::string_view::npos) value.remove_suffix(partial_suffix(value, kQcParamClose));
  if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
  if (close != std::string_view::npos || final) {
    args += parameter_json(s, v, value.size(), out.memo());
    v = close == std::string_view::npos ? s.size() : close + kQcParamClose.size();
    return close == std::string_view::npos ? Scan::kMore : Scan::kDone;
  }
  if (v < s.size() && !may_be_json(s.substr(v))) args += "\"" + escape_memo(s, v, value.size(), out.memo());
  return Scan::kMore;
}

// The parameters after `<function=NAME>`; args hold the JSON text so far.
RegionScan qwen_parameters(std::string_view s, size_t j, SnapshotBuilder& out) {
  std::string args;
  const auto stop = [&](Scan why, size_t end) {
    if (out.final() && why == Scan::kMore) args += args.empty() ? "{}" : "}";
    out.args(args);
    return RegionScan{why, end};
  };
  for (;;) {
    j = skip_space(s, j);
    if (const Scan m = match_word(s, j, kQcFunctionClose); m != Scan::kBad) {
      if (m == Scan::kMore) return stop(Scan::kMore, s.size());
      args += args.empty() ? "{}" : "}";
      out.args(args);
      return close_with(s, kToolCallClose, {Scan::kDone, j});
    }
    if (const Scan m = match_word(s, j, kToolCallClose); m != Scan::kBad) {  // </function> left out
      if (m == Scan::kMore) return stop(Scan::kMore, s.size());
      args += args.empty() ? "{}" : "}";
      out.args(args);
      return {Scan::kDone, j};
    }
    if (const Scan m = match_word(s, j, kQcParamOpen); m != Scan::kDone) return stop(m, j);
    const size_t key = j;
    while (j < s.size() && s[j] != '>' && s[j] != '<' && s[j] != '\n' && j - key <= kMaxNameBytes) ++j;
    if (j == s.size()) return stop(Scan::kMore, key);
    if (j == key || s[j] != '>' || j - key > kMaxNameBytes) return stop(Scan::kBad, key);
    args += (args.empty() ? "{\"" : ", \"") + json_escape(s.substr(key, j - key)) + "\": ";
    ++j;
    if (qwen_parameter_value(s, j, out, args) == Scan::kMore) return stop(Scan::kMore, s.size());
  }
}

RegionScan qwen3_coder_region(std::string_view s, std::string_view, size_t i, SnapshotBuilder& out) {
  i = skip_space(s, i);
  if (i < s.size() && s[i] == '{') {  // a Hermes-style JSON call
    const CallObjectScan c = report_call_object(s, i, {{"name"}, {"arguments"}}, out);
    if (c.status != Scan::kDone) return {c.status, c.status == Scan::kMore ? s.size() : c.committed ? c.end : i};
    return close_with(s, kToolCallClose, {Scan::kDone, c.end});
  }
  if (Scan m = match_word(s, i, kQcFunctionOpen); m != Scan::kDone) return {m, i};
  std::string name;
  if (Scan m = tagged_name(s, i, '>', name); m != Scan::kDone) return {m, i};
  out.begin_call(std::move(name));
  return qwen_parameters(s, i, out);
}

// Functionary: `<function=NAME>ARGS</function>` (v3.1) and `>>>NAME\nARGS`
// segments (v3.2), where `>>>all\n` begins plain text.
RegionScan functionary_region(std::string_view s, std::string_view opener, size_t i, SnapshotBuilder& out) {
  std::string name;
  if (Scan m = tagged_name(s, i, opener == kQcFunctionOpen ? '>' : '\n', name); m != Scan::kDone) return {m, i};
  if (name == "all" && opener != kQcFunctionOpen) return {Scan::kDone, i};
  const size_t j = skip_space(s, i);
  if (j == s.size()) return {Scan::kMore, j};
  if (s[j] != '{') return {Scan::kBad, i};
  out.begin_call(std::move(name));
  const JsonValueScan v = scan_json_value(s, j, out.memo());
  if (v.status != Scan::kBad) report_args(s, v.begin, v.end, v.status == Scan::kDone, out);
  if (v.status != Scan::kDone) return {v.status, s.size()};
  return opener == kQcFunctionOpen ? close_with(s, kQcFunctionClose, {Scan::kDone, v.end})
                                   : RegionScan{Scan::kDone, v.end};
}

}  // namespace

void parse_qwen3_coder(std::string_view text, SnapshotBuilder& out) {
  scan_with_openers(text, 0, {kToolCallOpen}, qwen3_coder_region, out);
}

void parse_functionary(std::string_view text, SnapshotBuilder& out) {
  // v3.2's prompt may end with ">>>": then the output begins with NAME\n.
  size_t j = 0;
  while (j < text.size() && is_name_char(text[j])) ++j;
  if (j == text.size() && j > 0 && !out.final()) return;
  if (j > 0 && j < text.size() && text[j] == '\n') {
    SnapshotBuilder probe(out.final());
    if (functionary_region(text, ">>>", 0, probe).status != Scan::kBad) {
      const RegionScan r = functionary_region(text, ">>>", 0, out);
      if (r.status == Scan::kMore) {
        if (out.final() && out.num_calls() == 0) out.content(text);
        return;
      }
      return scan_with_openers(text, r.end, {kQcFunctionOpen, ">>>"}, functionary_region, out);
    }
  }
  scan_with_openers(text, 0, {kQcFunctionOpen, ">>>"}, functionary_region, out);
}

}  // namespace tokenmill::server::tools_internal
