#include "jinja/lexer.h"

#include <algorithm>
#include <cstring>

namespace tokenmill::jinja {

[[noreturn]] void throw_error(ErrorKind kind, int line, int column, const std::string& message) {
  throw TemplateError(kind, line, column, message);
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class SourceLexer {
 public:
  SourceLexer(std::string_view src, const ParseOptions& options) : src_(src), options_(options) {
    line_starts_.push_back(0);
    for (size_t n = 0; n < src_.size(); ++n) {
      if (src_[n] == '\n') line_starts_.push_back(n + 1);
    }
  }

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) pos = lex_segment(pos);
    push(TokenType::kEof, "", src_.size());
    return std::move(tokens_);
  }

 private:
  void locate(size_t offset, int& line, int& column) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t index = static_cast<size_t>(it - line_starts_.begin()) - 1;
    line = static_cast<int>(index) + 1;
    column = static_cast<int>(offset - line_starts_[index]) + 1;
  }

  [[noreturn]] void error(size_t offset, const std::string& message) const {
    int line, column;
    locate(offset, line, column);
    throw_error(ErrorKind::kSyntax, line, column, message);
  }

  Token& push(TokenType type, std::string text, size_t offset) {
    Token t{type, std::move(text)};
    locate(offset, t.line, t.column);
    tokens_.push_back(std::move(t));
    return tokens_.back();
  }

  size_t find_tag(size_t pos) const {
    for (size_t n = pos; n + 1 < src_.size(); ++n) {
      if (src_[n] == '{' && (src_[n + 1] == '{' || src_[n + 1] == '%' || src_[n + 1] == '#')) return n;
    }
    return std::string_view::npos;
  }

  // Applies {%- and lstrip_blocks to the text before a tag.
  std::string_view strip_before(std::string_view text, char kind, char modifier, bool line_starting) const {
    if (modifier == '-') {
      size_t end = text.size();
      while (end > 0 && is_space(text[end - 1])) --end;
      return text.substr(0, end);
    }
    if ((kind == '%' || kind == '#') && options_.lstrip_blocks && modifier != '+') {
      const size_t nl = text.rfind('\n');
      const size_t start = nl == std::string_view::npos ? 0 : nl + 1;
      if (start > 0 || line_starting) {
        const bool blank = std::all_of(text.begin() + static_cast<long>(start), text.end(),
                                       [](char c) { return c == ' ' || c == '\t'; });
        if (blank) return text.substr(0, start);
      }
    }
    return text;
  }

  // After a tag's closing delimiter: -%} eats all whitespace, trim_blocks one newline.
  size_t skip_after(size_t pos, char modifier, bool block_like) {
    if (modifier == '-') {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
    } else if (modifier != '+' && block_like && options_.trim_blocks && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    return pos;
  }

  size_t lex_segment(size_t pos) {
    const bool line_starting = pos == 0 || src_[pos - 1] == '\n';
    const size_t tag = find_tag(pos);
    if (tag == std::string_view::npos) {
      push(TokenType::kText, std::string(src_.substr(pos)), pos);
      return src_.size();
    }
    const char kind = src_[tag + 1];
    const char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
    const std::string_view text = strip_before(src_.substr(pos, tag - pos), kind, modifier, line_starting);
    if (!text.empty()) push(TokenType::kText, std::string(text), pos);
    size_t inner = tag + 2;
    if (modifier == '-' || modifier == '+') ++inner;
    if (kind == '#') return lex_comment(tag, inner);
    if (kind == '%') {
      const size_t raw_end = lex_raw(tag, inner);
      if (raw_end != 0) return raw_end;
    }
    return lex_tag(tag, inner, kind);
  }

  size_t lex_comment(size_t tag, size_t inner) {
    const size_t end = src_.find("#}", inner);
    if (end == std::string_view::npos) error(tag, "missing end of comment tag");
    const char modifier = end > inner && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    return skip_after(end + 2, modifier, true);
  }

  // Matches `[-+]? ws* word ws* [-+]? %}` at pos; returns the offset after it and the closing modifier.
  bool match_simple_tag(size_t pos, std::string_view word, size_t& after, char& close_modifier) const {
    while (pos < src_.size() && is_space(src_[pos])) ++pos;
    if (src_.substr(pos, word.size()) != word) return false;
    pos += word.size();
    while (pos < src_.size() && is_space(src_[pos])) ++pos;
    close_modifier = '\0';
    if (pos < src_.size() && (src_[pos] == '-' || src_[pos] == '+')) close_modifier = src_[pos++];
    if (src_.substr(pos, 2) != "%}") return false;
    after = pos + 2;
    return true;
  }

  // {% raw %}...{% endraw %}: the body is text, tags in it are not parsed. Returns 0 when not raw.
  size_t lex_raw(size_t tag, size_t inner) {
    size_t body;
    char close;
    // jinja2 opens a raw block with "%}" or "-%}" only; "raw +%}" is an unknown tag there.
    if (!match_simple_tag(inner, "raw", body, close) || close == '+') return 0;
    if (close == '-') {
      while (body < src_.size() && is_space(src_[body])) ++body;
    }
    for (size_t end = src_.find("{%", body); end != std::string_view::npos; end = src_.find("{%", end + 2)) {
      size_t after;
      char end_close;
      const char open_mod = end + 2 < src_.size() ? src_[end + 2] : '\0';
      const size_t start = end + 2 + (open_mod == '-' || open_mod == '+' ? 1 : 0);
      if (!match_simple_tag(start, "endraw", after, end_close)) continue;
      std::string_view text = src_.substr(body, end - body);
      text = strip_before(text, '%', open_mod, false);
      if (!text.empty()) push(TokenType::kText, std::string(text), body);
      return skip_after(after, end_close, true);
    }
    error(tag, "missing {% endraw %}");
  }

  size_t lex_tag(size_t tag, size_t pos, char kind) {
    const bool block = kind == '%';
    push(block ? TokenType::kBlockBegin : TokenType::kVarBegin, "", tag);
    std::vector<char> stack;
    const char closer = block ? '%' : '}';
    while (true) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
      if (pos >= src_.size()) error(tag, block ? "unexpected end of template, missing '%}'" : "missing '}}'");
      if (stack.empty()) {
        const char m = src_[pos];
        const size_t at = (m == '-' || (m == '+' && block)) ? pos + 1 : pos;
        if (at + 1 < src_.size() && src_[at] == closer && src_[at + 1] == '}') {
          push(block ? TokenType::kBlockEnd : TokenType::kVarEnd, "", pos);
          return skip_after(at + 2, at != pos ? m : '\0', block);
        }
      }
      pos = lex_expression_token(pos, stack);
    }
  }

  size_t lex_expression_token(size_t pos, std::vector<char>& stack) {
    const char c = src_[pos];
    if (is_name_start(c)) {
      size_t end = pos;
      while (end < src_.size() && (is_name_start(src_[end]) || is_digit(src_[end]))) ++end;
      push(TokenType::kName, std::string(src_.substr(pos, end - pos)), pos);
      return end;
    }
    if (is_digit(c)) return lex_number(pos);
    if (c == '\'' || c == '"') return lex_string(pos);
    static constexpr const char* kTwo[] = {"**", "//", "==", "!=", "<=", ">="};
    for (const char* op : kTwo) {
      if (src_.substr(pos, 2) == op) {
        push(TokenType::kOperator, op, pos);
        return pos + 2;
      }
    }
    if (std::strchr("+-*/%<>=.,:|~()[]{}", c) == nullptr) error(pos, std::string("unexpected character '") + c + "'");
    if (c == '(' || c == '[' || c == '{') stack.push_back(c);
    if (c == ')' || c == ']' || c == '}') {
      const char open = c == ')' ? '(' : (c == ']' ? '[' : '{');
      if (stack.empty() || stack.back() != open) error(pos, std::string("unexpected '") + c + "'");
      stack.pop_back();
    }
    push(TokenType::kOperator, std::string(1, c), pos);
    return pos + 1;
  }

  size_t lex_number(size_t pos) {
    size_t end = pos;
    while (end < src_.size() && (is_digit(src_[end]) || src_[end] == '_')) ++end;
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
      is_float = true;
      ++end;
      while (end < src_.size() && (is_digit(src_[end]) || src_[end] == '_')) ++end;
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t e = end + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && is_digit(src_[e])) {
        is_float = true;
        end = e;
        while (end < src_.size() && is_digit(src_[end])) ++end;
      }
    }
    std::string digits;
    for (size_t n = pos; n < end; ++n) {
      if (src_[n] != '_') digits += src_[n];
    }
    Token& t = push(is_float ? TokenType::kFloat : TokenType::kInt, digits, pos);
    try {
      if (is_float) {
        t.float_value = std::strtod(digits.c_str(), nullptr);  // subnormals and overflow (inf) as Python reads them
      } else {
        t.int_value = std::stoll(digits);
      }
    } catch (const std::exception&) {
      error(pos, "number out of range: " + digits);
    }
    return end;
  }

  size_t lex_string(size_t pos) {
    const char quote = src_[pos];
    std::string value;
    size_t n = pos + 1;
    while (n < src_.size() && src_[n] != quote) {
      if (src_[n] == '\\' && n + 1 < src_.size()) {
        n = lex_escape(n, value);
      } else {
        value += src_[n++];
      }
    }
    if (n >= src_.size()) error(pos, "unterminated string");
    push(TokenType::kString, std::move(value), pos);
    return n + 1;
  }

  // Python's string escapes; an unknown escape keeps its backslash, as Python does.
  size_t lex_escape(size_t n, std::string& value) {
    const char e = src_[n + 1];
    switch (e) {
      case 'n': value += '\n'; return n + 2;
      case 't': value += '\t'; return n + 2;
      case 'r': value += '\r'; return n + 2;
      case 'b': value += '\b'; return n + 2;
      case 'f': value += '\f'; return n + 2;
      case 'v': value += '\v'; return n + 2;
      case 'a': value += '\a'; return n + 2;
      case '0': value += '\0'; return n + 2;
      case '\\': value += '\\'; return n + 2;
      case '\'': value += '\''; return n + 2;
      case '"': value += '"'; return n + 2;
      case '\n': return n + 2;
      case 'x':
      case 'u':
      case 'U': {
        const size_t len = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
        if (n + 2 + len <= src_.size()) {
          const std::string hex(src_.substr(n + 2, len));
          if (hex.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos) {
            append_utf8(value, static_cast<uint32_t>(std::stoul(hex, nullptr, 16)));
            return n + 2 + len;
          }
        }
        error(n, "bad escape in string");
      }
      default: value += '\\'; return n + 1;
    }
  }

  std::string_view src_;
  const ParseOptions& options_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const ParseOptions& options) {
  // jinja2 turns every \r\n and \r of the source into \n (its newline_sequence).
  std::string normalized;
  normalized.reserve(source.size());
  for (size_t n = 0; n < source.size(); ++n) {
    if (source[n] == '\r') {
      normalized += '\n';
      if (n + 1 < source.size() && source[n + 1] == '\n') ++n;
    } else {
      normalized += source[n];
    }
  }
  std::string_view text = normalized;
  if (!options.keep_trailing_newline && !text.empty() && text.back() == '\n') text.remove_suffix(1);
  return SourceLexer(text, options).run();
}

}  // namespace tokenmill::jinja
