#include "spec/layer_skip.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "util/error.h"

namespace tokenmill::spec {
namespace {

bool is_fraction(std::string_view s) { return s.find('.') != std::string_view::npos; }

double parse_fraction(std::string_view s) {
  double f = 0.0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), f);
  if (ec != std::errc() || end != s.data() + s.size() || !(f > 0.0 && f < 1.0))
    fail("--spec-skip-layers '{}': a fraction must be a number in (0, 1)", s);
  return f;
}

int64_t parse_index(std::string_view whole, std::string_view s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0)
    fail("--spec-skip-layers '{}': '{}' is not a layer index (write e.g. 4-11 or 2,5,7-9 or 0.5)", whole, s);
  return v;
}

// Calls add(first, last) for each item of a list spelling.
template <typename F>
void for_each_range(std::string_view whole, F add) {
  std::string_view rest = whole;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const size_t dash = item.find('-');
    const int64_t first = parse_index(whole, item.substr(0, dash));
    const int64_t last = dash == std::string_view::npos ? first : parse_index(whole, item.substr(dash + 1));
    if (last < first) fail("--spec-skip-layers '{}': range {}-{} is reversed", whole, first, last);
    add(first, last);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
}

}  // namespace

void check_skip_layers(std::string_view spelling) {
  if (spelling.empty()) fail("--spec-skip-layers is empty (write e.g. 4-11 or 2,5,7-9 or 0.5)");
  if (is_fraction(spelling)) {
    parse_fraction(spelling);
    return;
  }
  for_each_range(spelling, [](int64_t, int64_t) {});
}

std::vector<uint8_t> resolve_skip_layers(std::string_view spelling, int64_t n_layer) {
  check_skip_layers(spelling);
  std::vector<uint8_t> skip(static_cast<size_t>(n_layer), 0);
  if (is_fraction(spelling)) {
    // Centred run, first and last layers kept: at most n_layer - 2 skipped.
    const int64_t count =
        std::min<int64_t>(std::llround(parse_fraction(spelling) * static_cast<double>(n_layer)), n_layer - 2);
    const int64_t first = (n_layer - count) / 2;
    for (int64_t l = first; l < first + count; ++l) skip[static_cast<size_t>(l)] = 1;
  } else {
    for_each_range(spelling, [&](int64_t first, int64_t last) {
      if (last >= n_layer)
        fail("--spec-skip-layers '{}': layer {} is past the model's last layer {}", spelling, last, n_layer - 1);
      for (int64_t l = first; l <= last; ++l) skip[static_cast<size_t>(l)] = 1;
    });
  }
  const auto skipped = std::count(skip.begin(), skip.end(), uint8_t{1});
  if (skipped == 0) fail("--spec-skip-layers '{}' skips no layer of this {}-layer model", spelling, n_layer);
  if (skipped == n_layer) fail("--spec-skip-layers '{}' skips every layer of this {}-layer model", spelling, n_layer);
  return skip;
}

}  // namespace tokenmill::spec
