#include "jinja/string_util.h"

#include <fmt/format.h>

#include "jinja/render.h"

namespace tokenmill::jinja {

int64_t code_point_count(std::string_view s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool is_python_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || (c >= 0x1c && c <= 0x1f);
}

std::string strip_chars(const std::string& s, const std::string* chars, bool left, bool right) {
  auto strip_it = [&](size_t pos, size_t len) {
    if (chars == nullptr) return is_python_space(s[pos]);
    return chars->find(s.substr(pos, len)) != std::string::npos;
  };
  const std::vector<std::string> cps = split_code_points(s);
  size_t begin = 0, end = cps.size();
  size_t byte_begin = 0, byte_end = s.size();
  while (left && begin < end && strip_it(byte_begin, cps[begin].size())) byte_begin += cps[begin++].size();
  while (right && end > begin && strip_it(byte_end - cps[end - 1].size(), cps[end - 1].size()))
    byte_end -= cps[--end].size();
  return s.substr(byte_begin, byte_end - byte_begin);
}

namespace {

std::vector<std::string> split_whitespace(const std::string& s, int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (!from_right) {
    size_t n = 0;
    while (true) {
      while (n < s.size() && is_python_space(s[n])) ++n;
      if (n >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t end = s.size();
        while (end > n && is_python_space(s[end - 1])) --end;
        out.push_back(s.substr(n, end - n));
        break;
      }
      size_t e = n;
      while (e < s.size() && !is_python_space(s[e])) ++e;
      out.push_back(s.substr(n, e - n));
      n = e;
    }
    return out;
  }
  size_t n = s.size();
  while (true) {
    while (n > 0 && is_python_space(s[n - 1])) --n;
    if (n == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t b = 0;
      while (b < n && is_python_space(s[b])) ++b;
      out.push_back(s.substr(b, n - b));
      break;
    }
    size_t b = n;
    while (b > 0 && !is_python_space(s[b - 1])) --b;
    out.push_back(s.substr(b, n - b));
    n = b;
  }
  return {out.rbegin(), out.rend()};
}

}  // namespace

std::vector<std::string> python_split(const std::string& s, const std::string* sep, int64_t maxsplit, bool from_right) {
  if (sep == nullptr) return split_whitespace(s, maxsplit, from_right);
  std::vector<std::string> out;
  if (!from_right) {
    size_t start = 0;
    for (size_t at = s.find(*sep); at != std::string::npos; at = s.find(*sep, start)) {
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) break;
      out.push_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.push_back(s.substr(start));
    return out;
  }
  size_t end = s.size();
  while (true) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) break;
    if (end < sep->size()) break;
    const size_t at = s.rfind(*sep, end - sep->size());
    if (at == std::string::npos) break;
    out.push_back(s.substr(at + sep->size(), end - at - sep->size()));
    end = at;
  }
  out.push_back(s.substr(0, end));
  return {out.rbegin(), out.rend()};
}

std::string replace_all(const std::string& s, const std::string& old, const std::string& with, int64_t count,
                        size_t max_bytes) {
  std::string out;
  auto append = [&](std::string_view piece) {
    if (out.size() + piece.size() > max_bytes) fail_limit("a string would exceed max_output_bytes");
    out.append(piece);
  };
  if (old.empty()) {
    // Python inserts `with` before every code point and at the end.
    int64_t done = 0;
    for (const std::string& cp : split_code_points(s)) {
      if (count < 0 || done++ < count) append(with);
      append(cp);
    }
    if (count < 0 || done < count) append(with);
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  for (size_t at = s.find(old); at != std::string::npos && (count < 0 || done < count); at = s.find(old, start)) {
    append(std::string_view(s).substr(start, at - start));
    append(with);
    start = at + old.size();
    ++done;
  }
  append(std::string_view(s).substr(start));
  return out;
}

std::string ascii_upper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  }
  return s;
}

std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  }
  return s;
}

// A code point with case: upper- and lower-casing it differ.
bool is_cased(const std::string& cp) { return to_upper(cp) != to_lower(cp); }

std::string python_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (const std::string& cp : split_code_points(s)) {
    const bool cased = is_cased(cp);
    out += cased ? (prev_cased ? to_lower(cp) : to_upper(cp)) : cp;
    prev_cased = cased;
  }
  return out;
}

std::string capitalize(const std::string& s) {
  const std::vector<std::string> cps = split_code_points(s);
  std::string out;
  for (size_t n = 0; n < cps.size(); ++n) out += n == 0 ? to_upper(cps[n]) : to_lower(cps[n]);
  return out;
}

int64_t count_occurrences(const std::string& s, const std::string& sub) {
  if (sub.empty()) return code_point_count(s) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

std::string python_format(const std::string& format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t n = 0; n < format.size(); ++n) {
    const char c = format[n];
    if ((c == '{' || c == '}') && n + 1 < format.size() && format[n + 1] == c) {
      out += c;
      ++n;
      continue;
    }
    if (c == '}') fail_render("Single '}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t close = format.find('}', n);
    if (close == std::string::npos) fail_render("Single '{' encountered in format string");
    std::string field = format.substr(n + 1, close - n - 1);
    if (field.find(':') != std::string::npos) field = field.substr(0, field.find(':'));
    Value v;
    if (field.empty()) {
      v = args.get(auto_index++, "");
    } else if (field.find_first_not_of("0123456789") == std::string::npos) {
      v = args.get(static_cast<size_t>(std::stoul(field)), "");
    } else {
      v = args.get(SIZE_MAX, field);
    }
    if (v.is_undefined()) fail_render(fmt::format("format field '{}' has no argument", field));
    out += to_str(v);
    n = close;
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t n = 0; n < s.size(); ++n) {
    const char c = s[n];
    if (c != '\n' && c != '\r' && c != '\v' && c != '\f' && !(c >= 0x1c && c <= 0x1e)) continue;
    size_t end = n + 1;
    if (c == '\r' && end < s.size() && s[end] == '\n') ++end;
    out.push_back(s.substr(start, (keepends ? end : n) - start));
    start = end;
    n = end - 1;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

std::string zfill(const std::string& s, int64_t width) {
  const int64_t len = code_point_count(s);
  if (width <= len) return s;
  const size_t pad = static_cast<size_t>(std::min<int64_t>(width - len, 1 << 20));
  const bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
  return (sign ? s.substr(0, 1) : "") + std::string(pad, '0') + (sign ? s.substr(1) : s);
}

std::string center(const std::string& s, int64_t width, size_t max_bytes, const std::string& fill) {
  const int64_t len = code_point_count(s);
  if (width <= len) return s;
  if (static_cast<uint64_t>(width) > max_bytes) fail_limit("a string would exceed max_output_bytes");
  const auto marg = static_cast<size_t>(width - len);
  const size_t left = marg / 2 + (marg & static_cast<size_t>(width) & 1);
  auto repeat = [&](size_t count) {
    std::string out;
    for (size_t k = 0; k < count; ++k) out += fill;
    return out;
  };
  return repeat(left) + s + repeat(marg - left);
}

bool char_class_test(const std::string& s, const std::string& method) {
  if (s.empty()) return false;
  bool any_cased = false;
  for (const char c : s) {
    const bool digit = c >= '0' && c <= '9';
    const bool lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
    any_cased = any_cased || lower || upper;
    if ((method == "isdigit" || method == "isnumeric" || method == "isdecimal") && !digit) return false;
    if (method == "isalpha" && !(lower || upper)) return false;
    if (method == "isalnum" && !(lower || upper || digit)) return false;
    if (method == "isspace" && !is_python_space(c)) return false;
    if (method == "islower" && upper) return false;
    if (method == "isupper" && lower) return false;
  }
  return (method != "islower" && method != "isupper") || any_cased;
}

}  // namespace tokenmill::jinja
