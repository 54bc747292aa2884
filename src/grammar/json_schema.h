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
// Supported: type (a name or an array of names), enum, const, anyOf, oneOf
// (only when the branches provably cannot both match: different types,
// different enum/const values, or a required property with disjoint
// schemas), allOf (merged when the parts do not clash), $ref to # pointers
// ($defs, definitions, any #/... path; recursion through a rule per
// target), properties, required, additionalProperties, items, prefixItems,
// minItems, maxItems, uniqueItems false, minLength, maxLength, pattern
// (Python's re.search semantics: unanchored unless ^/$), format (date,
// time, date-time, uuid, email, ipv4, as Python's jsonschema checks them
// for draft 2020-12), minimum, maximum, exclusiveMinimum, exclusiveMaximum,
// and the annotations title, description, examples, default, $schema, $id
// (root only), $comment, deprecated, readOnly, writeOnly.
//
// Whitespace: outside strings the grammar allows a bounded run of spaces,
// tabs and newlines (at most 4 between two tokens, none around the whole
// value), so a sampled model cannot loop on whitespace forever.
//
// Subset, never superset: the grammar may accept fewer texts than the
// schema allows. Properties come in declared order, each at most once;
// with additionalProperties absent or true only declared properties appear
// (a schema without properties allows any object); numbers have at most 16
// integer and 16 fraction digits (12 and 6 when bounded, without exponent);
// a schema without `type` produces the types its keywords constrain; enum
// and const values are written in compact form; strings with a format or
// pattern, and the names of additional properties, use no escapes where
// none are needed; February stops at day 28 in dates.
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

// The same for a schema parsed with nlohmann::ordered_json, which keeps the
// order of `properties` as written; generated objects list their properties
// in that order (nlohmann::json sorts keys, so the overloads above list
// them alphabetically).
std::string json_schema_rules(const nlohmann::ordered_json& schema, std::string_view root_name,
                              const GrammarLimits& limits, const Deadline& deadline);
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const GrammarLimits& limits,
                                const Deadline& deadline);

// response_format {"type": "json_object"}: any JSON object.
std::string json_object_gbnf();

}  // namespace tokenmill::grammar
