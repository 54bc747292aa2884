// Python's printf-style `str % args` (and jinja2's format filter, which is
// the same operation): the conversions s r d i u f F e E g G x X o c %, with
// flags, width and precision.
#include <fmt/format.h>

#include <cstdio>

#include "jinja/render.h"
#include "jinja/string_util.h"

namespace tokenmill::jinja {
namespace {

struct PercentSpec {
  std::string flags;
  int width = -1;
  int precision = -1;
  char conversion = 0;
};

// Parses the spec after a '%' at `n`; returns the index of the conversion character.
size_t parse_percent_spec(const std::string& f, size_t n, PercentSpec& spec) {
  if (n < f.size() && f[n] == '(') fail_render("format: %(name) mappings are not supported");
  while (n < f.size() && std::string_view("-+ #0").find(f[n]) != std::string_view::npos) spec.flags += f[n++];
  auto number = [&](int& out) {
    if (n >= f.size() || f[n] < '0' || f[n] > '9') return;
    out = 0;
    while (n < f.size() && f[n] >= '0' && f[n] <= '9') out = std::min(out * 10 + (f[n++] - '0'), 1 << 16);
  };
  number(spec.width);
  if (n < f.size() && f[n] == '.') {
    ++n;
    spec.precision = 0;
    number(spec.precision);
  }
  if (n >= f.size()) fail_render("incomplete format");
  spec.conversion = f[n];
  return n;
}

std::string pad_to_width(std::string s, const PercentSpec& spec) {
  const int64_t len = code_point_count(s);
  if (spec.width < 0 || len >= spec.width) return s;
  const auto pad = static_cast<size_t>(spec.width - len);
  if (spec.flags.find('-') != std::string::npos) return s + std::string(pad, ' ');
  return std::string(pad, ' ') + s;
}

std::string convert_number(const PercentSpec& spec, const Value& v) {
  if (!v.is_number())
    fail_render(fmt::format("%{} format: a real number is required, not {}", spec.conversion, v.type_name()));
  std::string c_format = "%" + spec.flags;
  if (spec.width >= 0) c_format += std::to_string(spec.width);
  if (spec.precision >= 0) c_format += "." + std::to_string(spec.precision);
  char buf[512];
  const char conv = spec.conversion;
  if (conv == 'd' || conv == 'i' || conv == 'u' || conv == 'x' || conv == 'X' || conv == 'o') {
    const auto i =
        static_cast<long long>(v.kind == Value::Kind::kFloat ? v.f : (v.kind == Value::Kind::kBool ? v.b : v.i));
    c_format += (conv == 'i' || conv == 'u') ? std::string("lld") : std::string("ll") + conv;
    std::snprintf(buf, sizeof buf, c_format.c_str(), i);
  } else {
    c_format += conv;
    std::snprintf(buf, sizeof buf, c_format.c_str(), v.as_double());
  }
  return buf;
}

}  // namespace

std::string percent_format(const std::string& f, const std::vector<Value>& args, size_t max_bytes) {
  std::string out;
  size_t next = 0;
  for (size_t n = 0; n < f.size(); ++n) {
    if (f[n] != '%') {
      out += f[n];
      continue;
    }
    PercentSpec spec;
    n = parse_percent_spec(f, n + 1, spec);
    if (spec.conversion == '%') {
      out += '%';
      continue;
    }
    if (next >= args.size()) fail_render("not enough arguments for format string");
    const Value& v = args[next++];
    const char c = spec.conversion;
    if (c == 's' || c == 'r') {
      std::string s = c == 's' ? to_str(v) : to_repr(v);
      if (spec.precision >= 0) {
        const std::vector<std::string> cps = split_code_points(s);
        if (cps.size() > static_cast<size_t>(spec.precision)) {
          s.clear();
          for (int k = 0; k < spec.precision; ++k) s += cps[static_cast<size_t>(k)];
        }
      }
      out += pad_to_width(std::move(s), spec);
    } else if (c == 'c') {
      out += pad_to_width(v.is_string() ? v.s : std::string(1, static_cast<char>(v.i)), spec);
    } else if (std::string_view("diuxXofFeEgG").find(c) != std::string_view::npos) {
      out += convert_number(spec, v);
    } else {
      fail_render(fmt::format("unsupported format character '{}'", c));
    }
    if (out.size() > max_bytes) fail_limit("a string would exceed max_output_bytes");
  }
  if (next < args.size()) fail_render("not all arguments converted during string formatting");
  return out;
}

}  // namespace tokenmill::jinja
