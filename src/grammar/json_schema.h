// JSON Schema -> GBNF rules that accept exactly the JSON texts valid under
// the schema (up to the whitespace policy below), for constrained decoding.
//
// Fails closed: any keyword the converter does not implement, any schema
// that is not valid JSON Schema, and any limit exceeded throws
// tokenmill::Error whose message names the keyword (or limit) and the JSON
// pointer where it sits, e.g. "unsupported JSON Schema keyword
// 'patternProperties' at /properties/a". Never a grammar that accepts more
// than the schema allows.
//
// Whitespace: outside strings the grammar allows a bounded run of spaces and
// newlines (so a sampled model cannot loop on whitespace forever).
// Thread-safety: pure functions.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "grammar/grammar_limits.h"

namespace tokenmill::grammar {

// Rules defining `root_name` (and helpers named `root_name-...`, so several
// schemas' rules can share one grammar). root_name: [a-z][a-z0-9-]*.
std::string json_schema_rules(const nlohmann::json& schema, std::string_view root_name, const GrammarLimits& limits,
                              const Deadline& deadline);

// A complete grammar whose start rule `root` is the schema's value.
std::string json_schema_to_gbnf(const nlohmann::json& schema, const GrammarLimits& limits, const Deadline& deadline);

// response_format {"type": "json_object"}: any JSON object.
std::string json_object_gbnf();

}  // namespace tokenmill::grammar
