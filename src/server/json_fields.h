// Typed, validated reads of one JSON object's fields for request parsing.
// Every failure throws ApiError 400 naming the field (its `param`) and what
// was expected, e.g. "'temperature' must be a number in [0, 2], got \"hot\"".
// A JSON null counts as an absent field, as OpenAI's API treats it.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "util/bounded_json.h"

namespace tokenmill::server {

// Request bodies keep their keys in the order sent: a JSON Schema's
// property order becomes the order in which constrained output writes the
// fields (as OpenAI's structured outputs do), and tool definitions reach
// the prompt as the client wrote them.
using RequestJson = nlohmann::ordered_json;

// Parses a request body within `limits` (util/bounded_json.h: linear time,
// a key limit per object, a memory bound per document and, when
// limits.shared is set, server-wide). Throws ApiError: 400 for malformed
// JSON, nesting deeper than limits.max_depth, or (parse_json_object) a
// body that is not a JSON object; 413 for a document over the key or
// memory limit; 503 with Retry-After while the shared budget is spent.
RequestJson parse_json_value(std::string_view text, const util::JsonLimits& limits);
// The same into nlohmann::json (keys sorted), for bodies whose key order
// means nothing.
nlohmann::json parse_unordered_json(std::string_view text, const util::JsonLimits& limits);
RequestJson parse_json_object(std::string_view body, const util::JsonLimits& limits);

// A short rendering of a value for error messages (at most ~40 chars).
std::string describe_json(const RequestJson& value);

// Edits (insert, delete, substitute, swap neighbours) between a and b.
// Cost: O(|a| * |b|) time, O(|b|) memory.
size_t edit_distance(std::string_view a, std::string_view b);

// The known field a misspelt `name` most likely meant: the nearest one by
// edit_distance, at most 1 edit away for names of 4 to 7 characters and 2
// for longer ones (up to 64); nullopt when none is that close or the name
// is shorter than 4.
std::optional<std::string> closest_field(std::string_view name, const std::set<std::string, std::less<>>& known);

class JsonFields {
 public:
  // `prefix` prefixes param names in errors ("messages[2]." -> "messages[2].role").
  explicit JsonFields(const RequestJson& object, std::string prefix = "");

  // nullptr when absent or null.
  const RequestJson* find(std::string_view name) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }
  std::string param(std::string_view name) const { return prefix_ + std::string(name); }

  std::optional<int64_t> integer(std::string_view name, int64_t lo, int64_t hi) const;
  std::optional<double> number(std::string_view name, double lo, double hi) const;
  // Like number() but the lower bound is exclusive: (lo, hi].
  std::optional<double> number_above(std::string_view name, double lo, double hi) const;
  std::optional<bool> boolean(std::string_view name) const;
  std::optional<std::string> string(std::string_view name) const;
  // Any JSON integer's 64 bits (negative values wrap), e.g. a seed.
  std::optional<uint64_t> bits64(std::string_view name) const;

  // Throws for the first field not in `known`:
  // "unrecognized request argument 'foo'", with "(did you mean 'bar'?)"
  // when a known field is within closest_field's reach of it.
  void reject_unknown(const std::set<std::string, std::less<>>& known) const;

 private:
  const RequestJson& object_;
  std::string prefix_;
};

}  // namespace tokenmill::server
