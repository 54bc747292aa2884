// Text scanning shared by the tool-call formats (format_*.cc): whitespace,
// partial markers at the end of streamed text, a bracket-balancing JSON
// lexer, and scanners for a JSON value and for a call object such as
// {"name": "f", "arguments": {...}}.
//
// The scanners look at a prefix of a model's output: each says kDone (the
// thing is complete), kMore (the text so far may still become one) or kBad
// (it cannot). They never throw. Pure functions; cost linear in the text.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace tokenmill::server::tools_internal {

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
std::string_view rstrip(std::string_view s);
std::string_view strip(std::string_view s);
size_t skip_space(std::string_view s, size_t i);

// The length of the longest suffix of `s` that is a proper prefix of `word`.
size_t partial_suffix(std::string_view s, std::string_view word);
// The longest such suffix over several words.
size_t partial_suffix_any(std::string_view s, std::initializer_list<std::string_view> words);

enum class Scan { kDone, kMore, kBad };

// `word` at s[i] exactly: kDone (i moved past it), kMore (s ends inside
// it) or kBad.
Scan match_word(std::string_view s, size_t& i, std::string_view word);

// Where a JSON text stands: inside a string or not, how deep in brackets,
// and whether an object or array value has closed. Feeding it byte by
// byte or all at once gives the same state.
struct JsonLexer {
  bool in_string = false;
  bool escape = false;
  int depth = 0;
  bool closed = false;
  void step(char c);
};

// What the scanners learnt about a text that only grows (a streamed
// output, re-scanned at every piece), by position, so that each byte is
// scanned about once: the lexer state of open JSON values, how far a
// search found nothing, the escaped form of a string's settled part.
// SnapshotParser keeps one per parser; the scanners work without one.
struct ScanMemo {
  std::map<size_t, std::pair<size_t, JsonLexer>> json;        // value begin -> (lexed up to, state)
  std::map<std::pair<size_t, const char*>, size_t> searched;  // (from, word) -> no match below
  std::map<size_t, std::pair<size_t, std::string>> escaped;   // begin -> (bytes, json_escape of them)
};

// s.find(word, from), resuming where an earlier search of the same word
// from the same place stopped. `word` must outlive `memo` (a constant).
size_t find_memo(std::string_view s, std::string_view word, size_t from, ScanMemo* memo);

// json_escape(s.substr(begin, n)), extending an earlier escape of a
// shorter part of the same string.
std::string escape_memo(std::string_view s, size_t begin, size_t n, ScanMemo* memo);

// A JSON value starting at s[i] after whitespace: [begin, end) is its text
// (end = s.size() while kMore). Objects and arrays end where their
// brackets balance (their inside is not validated); a scalar ends at the
// first byte that cannot continue it.
struct JsonValueScan {
  Scan status = Scan::kBad;
  size_t begin = 0;
  size_t end = 0;
};
JsonValueScan scan_json_value(std::string_view s, size_t i, ScanMemo* memo = nullptr);

// A JSON string at s[i] (no whitespace skipped), decoded into `out`.
Scan scan_json_string(std::string_view s, size_t& i, std::string& out);

// Which keys of a call object hold the function's name and its arguments;
// other keys (such as "id" or "type") are skipped.
struct CallKeys {
  std::initializer_list<std::string_view> name = {"name"};
  std::initializer_list<std::string_view> args = {"arguments"};
};

// A call object at s[i] (after whitespace). A call is `committed` once its
// name is known and its arguments value has begun: its arguments are
// s[args_begin, args_end) (args_end = s.size() while they are open).
// kBad after commitment means the object broke after its arguments; `end`
// is then where it broke, else past the closing brace.
struct CallObjectScan {
  Scan status = Scan::kBad;
  bool committed = false;
  bool args_done = false;
  std::string name;
  size_t args_begin = 0;
  size_t args_end = 0;
  size_t end = 0;
};
CallObjectScan scan_call_object(std::string_view s, size_t i, const CallKeys& keys, ScanMemo* memo = nullptr);

// `text` as the inside of a JSON string (quotes not included), byte by
// byte: a prefix of the text escapes to a prefix of the whole's escape.
std::string json_escape(std::string_view text);

// A valid call name: 1..256 bytes of letters, digits, '_', '-', '.', ':'.
bool is_name_char(char c);
constexpr size_t kMaxNameBytes = 256;

}  // namespace tokenmill::server::tools_internal
