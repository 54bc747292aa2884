#include "bench/yaml_fields.h"

#include <utility>

#include "util/error.h"

namespace tokenmill::bench {

YamlFields::YamlFields(const YAML::Node& node, std::string path, std::string origin)
    : node_(node), path_(std::move(path)), origin_(std::move(origin)) {
  if (node_ && !node_.IsNull() && !node_.IsMap()) {
    fail("{}: {}: must be a map of keys to values", origin_, path_.empty() ? "top level" : path_);
  }
}

bool YamlFields::has(const std::string& key) const {
  const YAML::Node& map = node_;
  return map && map.IsMap() && map[key] && !map[key].IsNull();
}

YAML::Node YamlFields::get(const std::string& key) {
  read_.insert(key);
  if (!node_ || !node_.IsMap()) return YAML::Node();
  const YAML::Node& map = node_;  // const lookup: never inserts the key
  return map[key];
}

std::string YamlFields::field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

void YamlFields::fail_at(const std::string& key, const std::string& message) const {
  fail("{}: {}: {}", origin_, field(key), message);
}

double yaml_number(const YAML::Node& node, const std::string& origin, const std::string& field) {
  if (!node.IsScalar()) fail("{}: {}: must be a number", origin, field);
  try {
    return node.as<double>();
  } catch (const YAML::Exception&) {
    fail("{}: {}: must be a number (got '{}')", origin, field, node.Scalar());
  }
}

int64_t yaml_integer(const YAML::Node& node, const std::string& origin, const std::string& field) {
  if (!node.IsScalar()) fail("{}: {}: must be an integer", origin, field);
  try {
    return node.as<int64_t>();
  } catch (const YAML::Exception&) {
    fail("{}: {}: must be an integer (got '{}')", origin, field, node.Scalar());
  }
}

double YamlFields::number(const std::string& key, double fallback, double min, double max) {
  const YAML::Node n = get(key);
  if (!n || n.IsNull()) return fallback;
  const double v = yaml_number(n, origin_, field(key));
  if (!(v >= min && v <= max)) fail_at(key, fmt::format("must be in [{}, {}] (got {})", min, max, v));
  return v;
}

int64_t YamlFields::integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) {
  const YAML::Node n = get(key);
  if (!n || n.IsNull()) return fallback;
  const int64_t v = yaml_integer(n, origin_, field(key));
  if (v < min || v > max) fail_at(key, fmt::format("must be in [{}, {}] (got {})", min, max, v));
  return v;
}

bool YamlFields::boolean(const std::string& key, bool fallback) {
  const YAML::Node n = get(key);
  if (!n || n.IsNull()) return fallback;
  if (!n.IsScalar()) fail_at(key, "must be true or false");
  try {
    return n.as<bool>();
  } catch (const YAML::Exception&) {
    fail_at(key, fmt::format("must be true or false (got '{}')", n.Scalar()));
  }
}

std::string YamlFields::string(const std::string& key, const std::string& fallback) {
  const YAML::Node n = get(key);
  if (!n || n.IsNull()) return fallback;
  if (!n.IsScalar()) fail_at(key, "must be a string");
  return n.Scalar();
}

std::vector<double> YamlFields::numbers(const std::string& key, std::vector<double> fallback, double min, double max) {
  const YAML::Node n = get(key);
  if (!n || n.IsNull()) return fallback;
  std::vector<double> out;
  if (n.IsScalar()) {
    out.push_back(yaml_number(n, origin_, field(key)));
  } else if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) {
      out.push_back(yaml_number(n[i], origin_, fmt::format("{}[{}]", field(key), i)));
    }
  } else {
    fail_at(key, "must be a number or a list of numbers");
  }
  if (out.empty()) fail_at(key, "must not be empty");
  for (size_t i = 0; i < out.size(); ++i) {
    if (!(out[i] >= min && out[i] <= max)) {
      fail("{}: {}[{}]: must be in [{}, {}] (got {})", origin_, field(key), i, min, max, out[i]);
    }
  }
  return out;
}

std::vector<int64_t> YamlFields::integers(const std::string& key, std::vector<int64_t> fallback, int64_t min,
                                          int64_t max) {
  const YAML::Node n = get(key);
  if (!n || n.IsNull()) return fallback;
  std::vector<int64_t> out;
  if (n.IsScalar()) {
    out.push_back(yaml_integer(n, origin_, field(key)));
  } else if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) {
      out.push_back(yaml_integer(n[i], origin_, fmt::format("{}[{}]", field(key), i)));
    }
  } else {
    fail_at(key, "must be an integer or a list of integers");
  }
  if (out.empty()) fail_at(key, "must not be empty");
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] < min || out[i] > max) {
      fail("{}: {}[{}]: must be in [{}, {}] (got {})", origin_, field(key), i, min, max, out[i]);
    }
  }
  return out;
}

std::vector<std::string> YamlFields::strings(const std::string& key, std::vector<std::string> fallback) {
  const YAML::Node n = get(key);
  if (!n || n.IsNull()) return fallback;
  std::vector<std::string> out;
  if (n.IsScalar()) return {n.Scalar()};
  if (!n.IsSequence()) fail_at(key, "must be a string or a list of strings");
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar()) fail("{}: {}[{}]: must be a string", origin_, field(key), i);
    out.push_back(n[i].Scalar());
  }
  return out;
}

void YamlFields::finish() const {
  if (!node_ || !node_.IsMap()) return;
  for (const auto& kv : node_) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    if (!read_.count(key)) fail("{}: {}: unknown key", origin_, field(key));
  }
}

YAML::Node parse_yaml(const std::string& text, const std::string& origin) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    fail("{}: YAML syntax error at line {}, column {}: {}", origin, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
}

void apply_yaml_override(YAML::Node& root, const std::string& assignment, const std::string& origin) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    fail("{}: override '{}': use dotted.key=value", origin, assignment);
  }
  const std::string path = assignment.substr(0, eq);
  const YAML::Node value = parse_yaml(assignment.substr(eq + 1), "override " + path);
  if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  YAML::Node node = root;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (key.empty()) fail("{}: override '{}': empty key", origin, assignment);
    if (!node.IsMap() && !node.IsNull()) fail("{}: override '{}': {} is not a map", origin, assignment, key);
    if (dot == std::string::npos) {
      node[key] = value;
      return;
    }
    YAML::Node child = node[key];
    if (!child || child.IsNull()) node[key] = YAML::Node(YAML::NodeType::Map);
    node.reset(node[key]);  // rebinds; plain assignment would overwrite the node
    start = dot + 1;
  }
}

}  // namespace tokenmill::bench
