#include "server/json_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "server/api_error.h"
#include "util/bounded_json.h"

namespace tokenmill::server {

namespace {

// The answer to a refused body. Built and returned, then thrown in one
// place: clang 14 under ASan destroyed the string temporaries of
// [[noreturn]] bad_request(...) calls in the other cases of a switch when
// one case threw (stack-use-after-scope, a crashed server), so no case
// here creates temporaries that outlive it.
ApiError refusal_error(const util::JsonLimitError& e, const util::JsonLimits& limits) {
  switch (e.why()) {
    case util::JsonRefusal::kSyntax:
      return ApiError(400, fmt::format("the request body is not valid JSON: {}", e.what()), "invalid_request_error");
    case util::JsonRefusal::kTooDeep:
      return ApiError(400, fmt::format("the request body nests JSON deeper than {} levels", limits.max_depth),
                      "invalid_request_error");
    case util::JsonRefusal::kTooManyKeys:
    case util::JsonRefusal::kTooLarge:
      return ApiError(413, fmt::format("the request body is too large to parse: {}", e.what()), "invalid_request_error",
                      std::nullopt, "request_too_large");
    case util::JsonRefusal::kBusy: {
      ApiError busy(503, e.what(), "unavailable_error", std::nullopt, "server_busy");
      busy.with_retry_after(1);
      return busy;
    }
  }
  return ApiError(400, fmt::format("the request body could not be parsed: {}", e.what()), "invalid_request_error");
}

template <typename Json>
Json parse_request_json(std::string_view text, const util::JsonLimits& limits) {
  try {
    return util::parse_bounded<Json>(text, limits);
  } catch (const util::JsonLimitError& e) {
    throw refusal_error(e, limits);
  }
}

}  // namespace

RequestJson parse_json_value(std::string_view text, const util::JsonLimits& limits) {
  return parse_request_json<RequestJson>(text, limits);
}

nlohmann::json parse_unordered_json(std::string_view text, const util::JsonLimits& limits) {
  return parse_request_json<nlohmann::json>(text, limits);
}

RequestJson parse_json_object(std::string_view body, const util::JsonLimits& limits) {
  RequestJson j = parse_json_value(body, limits);
  if (!j.is_object()) bad_request("", "the request body must be a JSON object, got {}", describe_json(j));
  return j;
}

std::string describe_json(const RequestJson& value) {
  // Containers are named, not dumped: dumping recurses, and a request may
  // nest a million levels deep.
  if (value.is_array()) return fmt::format("a list of {} items", value.size());
  if (value.is_object()) return fmt::format("an object with {} fields", value.size());
  std::string s = value.dump(-1, ' ', false, RequestJson::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

JsonFields::JsonFields(const RequestJson& object, std::string prefix) : object_(object), prefix_(std::move(prefix)) {}

const RequestJson* JsonFields::find(std::string_view name) const {
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<int64_t> JsonFields::integer(std::string_view name, int64_t lo, int64_t hi) const {
  const RequestJson* v = find(name);
  if (!v) return std::nullopt;
  int64_t x = 0;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    x = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                       : static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    x = v->get<int64_t>();
  } else {
    bad_request(param(name), "'{}' must be an integer in [{}, {}], got {}", param(name), lo, hi, describe_json(*v));
  }
  if (x < lo || x > hi)
    bad_request(param(name), "'{}' must be an integer in [{}, {}], got {}", param(name), lo, hi, describe_json(*v));
  return x;
}

std::optional<double> JsonFields::number(std::string_view name, double lo, double hi) const {
  const RequestJson* v = find(name);
  if (!v) return std::nullopt;
  if (!v->is_number())
    bad_request(param(name), "'{}' must be a number in [{}, {}], got {}", param(name), lo, hi, describe_json(*v));
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    bad_request(param(name), "'{}' must be a number in [{}, {}], got {}", param(name), lo, hi, describe_json(*v));
  return x;
}

std::optional<double> JsonFields::number_above(std::string_view name, double lo, double hi) const {
  const RequestJson* v = find(name);
  if (!v) return std::nullopt;
  if (!v->is_number() || !(v->get<double>() > lo && v->get<double>() <= hi))
    bad_request(param(name), "'{}' must be a number in ({}, {}], got {}", param(name), lo, hi, describe_json(*v));
  return v->get<double>();
}

std::optional<bool> JsonFields::boolean(std::string_view name) const {
  const RequestJson* v = find(name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad_request(param(name), "'{}' must be a boolean, got {}", param(name), describe_json(*v));
  return v->get<bool>();
}

std::optional<std::string> JsonFields::string(std::string_view name) const {
  const RequestJson* v = find(name);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad_request(param(name), "'{}' must be a string, got {}", param(name), describe_json(*v));
  return v->get<std::string>();
}

std::optional<uint64_t> JsonFields::bits64(std::string_view name) const {
  const RequestJson* v = find(name);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) return v->get<uint64_t>();
  if (v->is_number_integer()) return static_cast<uint64_t>(v->get<int64_t>());
  bad_request(param(name), "'{}' must be an integer, got {}", param(name), describe_json(*v));
}

size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: insertions, deletions, substitutions and
  // swaps of neighbours ("max_tokens" -> "max_tokesn") each cost 1.
  std::vector<size_t> prev2(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> closest_field(std::string_view name, const std::set<std::string, std::less<>>& known) {
  // A typo is a slip or two, never most of the word: a short name is too
  // close to too many others ("x" is one edit from "n") to guess from.
  if (name.size() < 4 || name.size() > 64) return std::nullopt;  // > 64: bounds the cost on hostile keys
  const size_t limit = name.size() < 8 ? 1 : 2;
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const std::string& k : known) {  // in sorted order: ties go to the first
    const size_t d = edit_distance(name, k);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  return best;
}

void JsonFields::reject_unknown(const std::set<std::string, std::less<>>& known) const {
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    if (known.contains(it.key())) continue;
    if (std::optional<std::string> near = closest_field(it.key(), known))
      bad_request(param(it.key()), "unrecognized request argument '{}' (did you mean '{}'?)", param(it.key()),
                  param(*near));
    bad_request(param(it.key()), "unrecognized request argument '{}' (see docs/api.md for the supported fields)",
                param(it.key()));
  }
}

}  // namespace tokenmill::server
