#include "server/tools/format_scan.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <tuple>

namespace tokenmill::server::tools_internal {

std::string_view rstrip(std::string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view strip(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return rstrip(s);
}

size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

size_t partial_suffix(std::string_view s, std::string_view word) {
  for (size_t k = std::min(s.size(), word.size() - 1); k > 0; --k)
    if (s.substr(s.size() - k) == word.substr(0, k)) return k;
  return 0;
}

size_t partial_suffix_any(std::string_view s, std::initializer_list<std::string_view> words) {
  size_t best = 0;
  for (std::string_view w : words) best = std::max(best, partial_suffix(s, w));
  return best;
}

Scan match_word(std::string_view s, size_t& i, std::string_view word) {
  const size_t n = std::min(word.size(), s.size() - std::min(i, s.size()));
  if (s.substr(std::min(i, s.size()), n) != word.substr(0, n)) return Scan::kBad;
  if (n < word.size()) return Scan::kMore;
  i += n;
  return Scan::kDone;
}

void JsonLexer::step(char c) {
  if (escape) {
    escape = false;
  } else if (in_string) {
    escape = c == '\\';
    in_string = c != '"';
  } else if (c == '"') {
    in_string = true;
  } else if (c == '{' || c == '[') {
    ++depth;
  } else if ((c == '}' || c == ']') && depth > 0) {
    closed = --depth == 0;
  }
}

size_t find_memo(std::string_view s, std::string_view word, size_t from, ScanMemo* memo) {
  if (!memo) return s.find(word, from);
  size_t& below = memo->searched[{from, word.data()}];
  const size_t start = std::max(from, below >= word.size() ? below - word.size() + 1 : 0);
  const size_t p = s.find(word, start);
  below = p == std::string_view::npos ? s.size() : p + word.size() - 1;  // the next search starts at p
  return p;
}

std::string escape_memo(std::string_view s, size_t begin, size_t n, ScanMemo* memo) {
  if (!memo) return json_escape(s.substr(begin, n));
  auto& [done, escaped] = memo->escaped[begin];
  if (n < done) return json_escape(s.substr(begin, n));
  escaped += json_escape(s.substr(begin + done, n - done));
  done = n;
  return escaped;
}

JsonValueScan scan_json_value(std::string_view s, size_t i, ScanMemo* memo) {
  JsonValueScan out;
  i = skip_space(s, i);
  out.begin = i;
  out.end = s.size();
  out.status = Scan::kMore;
  if (i == s.size()) return out;
  const char c = s[i];
  if (c == '{' || c == '[' || c == '"') {
    JsonLexer lex;
    size_t j = i;
    if (memo)
      if (auto it = memo->json.find(i); it != memo->json.end() && it->second.first <= s.size())
        std::tie(j, lex) = it->second;
    for (; j < s.size(); ++j) {
      lex.step(s[j]);
      if (lex.closed || (c == '"' && j > i && !lex.in_string)) {
        out.end = j + 1;
        out.status = Scan::kDone;
        return out;
      }
    }
    if (memo) memo->json[i] = {j, lex};
    return out;
  }
  if (c != '-' && c != 't' && c != 'f' && c != 'n' && (c < '0' || c > '9')) {
    out.status = Scan::kBad;
    return out;
  }
  size_t j = i;
  while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '+' || s[j] == '-' || s[j] == '.'))
    ++j;
  if (j < s.size()) {
    out.end = j;
    out.status = Scan::kDone;
  }
  return out;
}

Scan scan_json_string(std::string_view s, size_t& i, std::string& out) {
  if (i >= s.size()) return Scan::kMore;
  if (s[i] != '"') return Scan::kBad;
  for (size_t j = i + 1; j < s.size(); ++j) {
    if (static_cast<unsigned char>(s[j]) < 0x20) return Scan::kBad;
    if (s[j] == '\\') {
      ++j;
      continue;
    }
    if (s[j] != '"') continue;
    const nlohmann::json v = nlohmann::json::parse(s.substr(i, j + 1 - i), nullptr, /*allow_exceptions=*/false);
    if (!v.is_string()) return Scan::kBad;
    out = v.get<std::string>();
    i = j + 1;
    return Scan::kDone;
  }
  return Scan::kMore;
}

namespace {

bool key_in(std::string_view key, std::initializer_list<std::string_view> keys) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// One member's value at s[i] for scan_call_object; returns how it ended.
Scan call_member_value(std::string_view s, size_t& i, const std::string& key, const CallKeys& keys, CallObjectScan& out,
                       bool& has_name, bool& has_args, ScanMemo* memo) {
  if (key_in(key, keys.name) && !has_name) {
    const Scan m = scan_json_string(s, i, out.name);
    has_name = m == Scan::kDone && !out.name.empty();
    out.committed = has_name && has_args;
    return m == Scan::kDone && !has_name ? Scan::kBad : m;
  }
  const JsonValueScan v = scan_json_value(s, i, memo);
  if (key_in(key, keys.args) && !has_args && v.status != Scan::kBad && v.begin < s.size()) {
    has_args = true;
    out.args_begin = v.begin;
    out.args_end = v.end;
    out.args_done = v.status == Scan::kDone;
    out.committed = has_name;
  }
  if (v.status == Scan::kDone) i = v.end;
  return v.status;
}

}  // namespace

CallObjectScan scan_call_object(std::string_view s, size_t i, const CallKeys& keys, ScanMemo* memo) {
  CallObjectScan out;
  i = skip_space(s, i);
  if ((out.status = match_word(s, i, "{")) != Scan::kDone) return out;
  bool has_name = false, has_args = false;
  auto stop = [&](Scan why) {
    out.status = why;
    out.end = i;
    return out;
  };
  for (;;) {
    i = skip_space(s, i);
    std::string key;
    if (Scan m = scan_json_string(s, i, key); m != Scan::kDone) return stop(m);
    i = skip_space(s, i);
    if (Scan m = match_word(s, i, ":"); m != Scan::kDone) return stop(m);
    i = skip_space(s, i);
    if (Scan m = call_member_value(s, i, key, keys, out, has_name, has_args, memo); m != Scan::kDone) return stop(m);
    i = skip_space(s, i);
    if (i == s.size()) return stop(Scan::kMore);
    if (s[i] == ',') {
      ++i;
      continue;
    }
    if (s[i] != '}') return stop(Scan::kBad);
    ++i;
    return stop(out.committed && out.args_done ? Scan::kDone : Scan::kBad);
  }
}

std::string json_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[(c >> 4) & 0xf];
          out += kHex[c & 0xf];
        } else {
          out += c;
        }
    }
  }
  return out;
}

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':';
}

}  // namespace tokenmill::server::tools_internal
