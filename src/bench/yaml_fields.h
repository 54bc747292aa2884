// Strict reading of one YAML map: typed getters with defaults and ranges,
// and finish() that rejects keys nobody read (so a typo such as
// "concurency" fails instead of silently taking the default). Every error
// names "<origin>: <path>.<key>".
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace tokenmill::bench {

class YamlFields {
 public:
  // `node` must be a map or null (an absent section reads as all defaults).
  YamlFields(const YAML::Node& node, std::string path, std::string origin);

  bool has(const std::string& key) const;
  YAML::Node get(const std::string& key);           // marks the key as read; null when absent
  std::string field(const std::string& key) const;  // "path.key" for messages
  [[noreturn]] void fail_at(const std::string& key, const std::string& message) const;

  double number(const std::string& key, double fallback, double min, double max);
  int64_t integer(const std::string& key, int64_t fallback, int64_t min, int64_t max);
  bool boolean(const std::string& key, bool fallback);
  std::string string(const std::string& key, const std::string& fallback);
  // A list of numbers; a single scalar reads as a one-element list.
  std::vector<double> numbers(const std::string& key, std::vector<double> fallback, double min, double max);
  std::vector<int64_t> integers(const std::string& key, std::vector<int64_t> fallback, int64_t min, int64_t max);
  std::vector<std::string> strings(const std::string& key, std::vector<std::string> fallback);

  // Throws for the first key that was never read.
  void finish() const;

  const std::string& origin() const { return origin_; }

 private:
  YAML::Node node_;
  std::string path_;
  std::string origin_;
  std::set<std::string> read_;
};

// Scalar conversions with the field name in the message (for list items).
double yaml_number(const YAML::Node& node, const std::string& origin, const std::string& field);
int64_t yaml_integer(const YAML::Node& node, const std::string& origin, const std::string& field);

// Parses YAML text; syntax errors become Error with line and column.
YAML::Node parse_yaml(const std::string& text, const std::string& origin);

// Applies "dotted.key=yaml-value" to a map tree (creating maps on the way).
void apply_yaml_override(YAML::Node& root, const std::string& assignment, const std::string& origin);

}  // namespace tokenmill::bench
