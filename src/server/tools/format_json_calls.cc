// The formats whose calls are JSON objects: Llama 3 (JSON and python_tag
// built-ins), Mistral, Granite and Command R (format_parser.h).
#include <cctype>

#include "server/tools/format_parser.h"

namespace tokenmill::server::tools_internal {
namespace {

const CallKeys kNameArguments{{"name"}, {"arguments"}};
const CallKeys kLlamaKeys{{"name"}, {"parameters", "arguments"}};
const CallKeys kCohereKeys{{"tool_name", "name"}, {"parameters", "arguments"}};

bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// A Python literal at s[i] (a keyword argument's value) as JSON text;
// advances i past it. kMore when the text ends inside it.
Scan python_literal_json(std::string_view s, size_t& i, std::string& json) {
  if (i == s.size()) return Scan::kMore;
  const char q = s[i];
  if (q == '"' || q == '\'') {
    std::string value;
    for (size_t j = i + 1; j < s.size(); ++j) {
      if (s[j] == q) {
        json = "\"" + json_escape(value) + "\"";
        i = j + 1;
        return Scan::kDone;
      }
      if (s[j] == '\\' && ++j < s.size()) {
        value += s[j] == 'n' ? '\n' : s[j] == 't' ? '\t' : s[j];
      } else if (s[j] != '\\') {
        value += s[j];
      }
    }
    return Scan::kMore;
  }
  size_t j = i;
  while (j < s.size() && s[j] != ',' && s[j] != ')' && !is_space(s[j])) ++j;
  if (j == s.size()) return Scan::kMore;
  const std::string_view token = s.substr(i, j - i);
  if (token.empty()) return Scan::kBad;
  const bool number = token.find_first_not_of("0123456789.-+eE") == std::string_view::npos;
  json = token == "True"    ? "true"
         : token == "False" ? "false"
         : token == "None"  ? "null"
         : number           ? std::string(token)
                            : "\"" + json_escape(token) + "\"";
  i = j;
  return Scan::kDone;
}

// `NAME.call(k=v, ...)` at s[i]; reported whole once it closes.
RegionScan llama_builtin_call(std::string_view s, size_t i, SnapshotBuilder& out) {
  size_t j = i;
  while (j < s.size() && is_ident_char(s[j])) ++j;
  if (j == s.size()) return {Scan::kMore, j};
  const std::string name(s.substr(i, j - i));
  if (name.empty()) return {Scan::kBad, i};
  if (Scan m = match_word(s, j, ".call("); m != Scan::kDone) return {m, j};
  std::string args = "{";
  for (bool first = true;; first = false) {
    j = skip_space(s, j);
    if (j == s.size()) return {Scan::kMore, j};
    if (s[j] == ')') break;
    if (!first && s[j++] != ',') return {Scan::kBad, i};
    j = skip_space(s, j);
    const size_t key = j;
    while (j < s.size() && is_ident_char(s[j])) ++j;
    if (j == s.size()) return {Scan::kMore, j};
    if (j == key) return {Scan::kBad, i};
    const std::string_view k = s.substr(key, j - key);
    j = skip_space(s, j);
    if (Scan m = match_word(s, j, "="); m != Scan::kDone) return {m, i};
    j = skip_space(s, j);
    std::string value;
    if (Scan m = python_literal_json(s, j, value); m != Scan::kDone) return {m, i};
    args += (first ? "\"" : ", \"") + json_escape(k) + "\": " + value;
  }
  out.begin_call(name);
  out.args(args + "}");
  return {Scan::kDone, j + 1};
}

RegionScan llama_python_tag(std::string_view s, std::string_view, size_t i, SnapshotBuilder& out) {
  i = skip_space(s, i);
  if (i == s.size()) return {Scan::kMore, i};
  if (s[i] == '{') return scan_call_sequence(s, i, ';', kLlamaKeys, out);
  return llama_builtin_call(s, i, out);
}

RegionScan mistral_region(std::string_view s, std::string_view, size_t i, SnapshotBuilder& out) {
  i = skip_space(s, i);
  if (i == s.size()) return {Scan::kMore, i};
  if (s[i] == '[') return scan_call_array(s, i, kNameArguments, out);
  size_t j = i;  // the newer form: NAME [CALL_ID]ID [ARGS]ARGS
  while (j < s.size() && is_name_char(s[j]) && j - i <= kMaxNameBytes) ++j;
  if (j == s.size()) return {Scan::kMore, j};
  if (j == i || j - i > kMaxNameBytes) return {Scan::kBad, i};
  const std::string name(s.substr(i, j - i));
  if (size_t k = j; match_word(s, k, "[CALL_ID]") != Scan::kBad) {
    if (k == j) return {Scan::kMore, k};  // "[CALL_ID" cut short, or "[" that may be either tag
    while (k < s.size() && s[k] != '[') ++k;
    j = k;
  }
  if (Scan m = match_word(s, j, "[ARGS]"); m != Scan::kDone) return {m, j};
  const JsonValueScan v = scan_json_value(s, j, out.memo());
  if (v.status == Scan::kBad) return {Scan::kBad, i};
  if (v.begin == s.size()) return {Scan::kMore, s.size()};  // a call counts once its arguments begin
  out.begin_call(name);
  report_args(s, v.begin, v.end, v.status == Scan::kDone, out);
  return {v.status, v.status == Scan::kDone ? v.end : s.size()};
}

RegionScan granite_region(std::string_view s, std::string_view, size_t i, SnapshotBuilder& out) {
  return scan_call_array(s, i, kNameArguments, out);
}

RegionScan command_r_region(std::string_view s, std::string_view opener, size_t i, SnapshotBuilder& out) {
  if (opener == "<|START_ACTION|>") {
    const RegionScan r = scan_call_array(s, i, kCohereKeys, out);
    return close_with(s, "<|END_ACTION|>", r);
  }
  i = skip_space(s, i);
  if (Scan m = match_word(s, i, "```"); m != Scan::kDone) return {m, i};
  if (match_word(s, i, "json") == Scan::kMore) return {Scan::kMore, s.size()};
  const RegionScan r = scan_call_array(s, i, kCohereKeys, out);
  return close_with(s, "```", r);
}

}  // namespace

void parse_llama3_json(std::string_view text, SnapshotBuilder& out) {
  const size_t j = skip_space(text, 0);
  if (j < text.size() && text[j] == '{') {
    SnapshotBuilder probe(out.final());
    const RegionScan r = scan_call_sequence(text, j, ';', kLlamaKeys, probe);
    if (probe.num_calls() > 0 || r.status == Scan::kMore) {
      const RegionScan again = scan_call_sequence(text, j, ';', kLlamaKeys, out);
      if (again.status == Scan::kMore) {
        if (out.final() && out.num_calls() == 0) out.content(text);
        return;
      }
      return scan_with_openers(text, again.end, {"<|python_tag|>"}, llama_python_tag, out);
    }
  }
  scan_with_openers(text, 0, {"<|python_tag|>"}, llama_python_tag, out);
}

void parse_mistral(std::string_view text, SnapshotBuilder& out) {
  scan_with_openers(text, 0, {"[TOOL_CALLS]"}, mistral_region, out);
}

void parse_granite(std::string_view text, SnapshotBuilder& out) {
  scan_with_openers(text, 0, {"<|tool_call|>"}, granite_region, out);
}

void parse_command_r(std::string_view text, SnapshotBuilder& out) {
  scan_with_openers(text, 0, {"Action:", "<|START_ACTION|>"}, command_r_region, out);
}

}  // namespace tokenmill::server::tools_internal
