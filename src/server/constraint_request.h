// Output constraints of a generation request -> one OutputConstraint, in
// every shape clients already send:
//   OpenAI     response_format {"type": "text" | "json_object" | "json_schema",
//              "json_schema": {"name", "schema", "strict", "description"}}
//   llama.cpp  response_format {"type": "json_object", "schema": {...}},
//              `grammar` (GBNF; "" = none) and `json_schema` (an object)
//   vLLM       guided_json (object or JSON text), guided_regex,
//              guided_grammar, guided_choice (list of strings), and the
//              newer structured_outputs {json | regex | grammar | choice |
//              json_object}
// At most one per request: two give a 400 naming both fields. Pure (fuzzed
// with the request parsers); nothing is compiled here.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "server/json_fields.h"
#include "server/sampling_request.h"

namespace tokenmill::server {

// JSON values nested deeper than this are refused before anything walks
// them recursively (dump, the schema converter).
inline constexpr int kMaxConstraintNesting = 512;

// The request fields parse_output_constraint() reads.
const std::set<std::string, std::less<>>& constraint_fields();

// nullopt when the request asks for free text. Throws ApiError 400 naming
// the field for a malformed constraint or for two of them.
std::optional<OutputConstraint> parse_output_constraint(const JsonFields& f);

// `s` as a GBNF string literal, quotes included: \\ \" \n \r \t and \xHH
// for other control bytes; other UTF-8 passes through.
std::string gbnf_literal(std::string_view s);

// A GBNF grammar whose sentences are exactly the strings of `choices`.
std::string choice_gbnf(const std::vector<std::string>& choices);

// Throws ApiError 400 naming `param` when `value` nests deeper than
// kMaxConstraintNesting. Iterative, so any depth is safe to check.
void check_nesting(const RequestJson& value, const std::string& param);

// ^[a-zA-Z0-9_-]{1,64}$: OpenAI's rule for schema and function names.
bool is_valid_name(std::string_view name);

}  // namespace tokenmill::server
