#include "bench/prometheus_text.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace tokenmill::bench {
namespace {

// The index of the '}' closing the label block that opens at `open`, or
// npos. Label values may hold '}' and escaped quotes inside quotes.
size_t label_block_end(const std::string& line, size_t open) {
  bool quoted = false;
  for (size_t i = open + 1; i < line.size(); ++i) {
    if (line[i] == '\\' && quoted)
      ++i;
    else if (line[i] == '"')
      quoted = !quoted;
    else if (line[i] == '}' && !quoted)
      return i;
  }
  return std::string::npos;
}

// Reads `key="value"` pairs of the block text (between the braces) into
// `labels`; stops at the first malformed pair.
void parse_labels(const std::string& block, std::map<std::string, std::string>& labels) {
  size_t i = 0;
  while (i < block.size()) {
    while (i < block.size() && (block[i] == ' ' || block[i] == '\t' || block[i] == ',')) ++i;
    const size_t eq = block.find('=', i);
    if (eq == std::string::npos) return;
    size_t key_end = eq;
    while (key_end > i && (block[key_end - 1] == ' ' || block[key_end - 1] == '\t')) --key_end;
    const std::string key = block.substr(i, key_end - i);
    size_t q = eq + 1;
    while (q < block.size() && (block[q] == ' ' || block[q] == '\t')) ++q;
    if (key.empty() || q >= block.size() || block[q] != '"') return;
    std::string value;
    size_t j = q + 1;
    for (; j < block.size() && block[j] != '"'; ++j) {
      if (block[j] == '\\' && j + 1 < block.size()) {
        ++j;
        value += block[j] == 'n' ? '\n' : block[j];
      } else {
        value += block[j];
      }
    }
    if (j >= block.size()) return;  // unterminated value
    labels[key] = std::move(value);
    i = j + 1;
  }
}

}  // namespace

std::vector<PrometheusSample> parse_prometheus_samples(const std::string& text) {
  std::vector<PrometheusSample> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ \t");
    if (name_end == std::string::npos || name_end == 0) continue;
    PrometheusSample s;
    s.name = line.substr(0, name_end);
    size_t value_start = name_end;
    if (line[name_end] == '{') {
      const size_t close = label_block_end(line, name_end);
      if (close == std::string::npos) continue;
      parse_labels(line.substr(name_end + 1, close - name_end - 1), s.labels);
      value_start = close + 1;
    }
    const char* begin = line.c_str() + value_start;
    char* end = nullptr;
    s.value = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(s.value)) continue;
    out.push_back(std::move(s));
  }
  return out;
}

std::map<std::string, double> parse_prometheus_text(const std::string& text) {
  std::map<std::string, double> out;
  for (const PrometheusSample& s : parse_prometheus_samples(text)) out[s.name] += s.value;
  return out;
}

std::optional<double> first_metric(const std::map<std::string, double>& metrics,
                                   const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    const auto it = metrics.find(n);
    if (it != metrics.end()) return it->second;
  }
  return std::nullopt;
}

std::optional<double> sum_samples(const std::vector<PrometheusSample>& samples, const std::string& name,
                                  const std::map<std::string, std::string>& match) {
  std::optional<double> total;
  for (const PrometheusSample& s : samples) {
    if (s.name != name) continue;
    if (!total) total = 0.0;
    bool matches = true;
    for (const auto& [k, v] : match) {
      const auto it = s.labels.find(k);
      matches = matches && it != s.labels.end() && it->second == v;
    }
    if (matches) *total += s.value;
  }
  return total;
}

}  // namespace tokenmill::bench
