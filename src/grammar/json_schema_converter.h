// The JSON Schema -> GBNF converter behind json_schema.h, split over
// json_schema*.cc by concern: json_schema.cc (dispatch, keywords, $ref),
// json_schema_combine.cc (allOf/anyOf/oneOf), json_schema_object.cc
// (objects, arrays), json_schema_string.cc (strings, formats, enum/const,
// the any-value rules), json_schema_number.cc (integer and number ranges).
//
// Every gen_* function returns a GBNF expression for one JSON value; it may
// add helper rules to the sink. Expressions are either one item (a rule
// name, literal, class or parenthesised group) or a plain sequence, never a
// bare top-level alternation, so callers can concatenate them.
// Thread-safety: one converter per conversion, on one thread.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar_limits.h"
#include "grammar/regex_rule_sink.h"

namespace tokenmill::grammar {

// Declared key order matters (properties are generated in that order).
using Json = nlohmann::ordered_json;

// JSON types as a bit mask; integers count as numbers.
enum JsonTypeBits : unsigned {
  kTypeNull = 1,
  kTypeBoolean = 2,
  kTypeObject = 4,
  kTypeArray = 8,
  kTypeString = 16,
  kTypeNumber = 32,
  kTypeAll = 63,
};

std::string child_pointer(const std::string& ptr, std::string_view key);
std::string child_pointer(const std::string& ptr, size_t index);
// The pointer as shown in messages ("/" for the root).
std::string where(const std::string& ptr);
// The keyword classes of json_schema.cc.
bool is_annotation(std::string_view key);
bool is_container(std::string_view key);  // $defs, definitions
// item{lo,hi} in the shortest spelling; hi < 0: unbounded; "" when hi == 0.
std::string repeat_text(const std::string& item, int64_t lo, int64_t hi);
// Equality as JSON Schema defines it: object key order does not matter.
bool json_equal(const Json& a, const Json& b);

class SchemaConverter {
 public:
  SchemaConverter(const Json& root, std::string root_name, const GrammarLimits& limits, const Deadline& deadline);
  // The rules text; the root rule first.
  std::string convert();
  // Only the any-object rule set (response_format json_object).
  std::string any_object_rules();

 private:
  friend class AtStartGuard;

  // json_schema.cc
  std::string visit(const Json& schema, const std::string& ptr, int depth, std::string_view hint);
  void check_keywords(const Json& schema, const std::string& ptr) const;
  std::string ref_rule(const Json& ref, const std::string& ptr, int depth);
  std::string ref_pointer(const Json& ref, const std::string& ptr) const;
  const Json& resolve(const std::string& target_ptr, const std::string& ref, const std::string& ptr) const;
  std::vector<std::string> types_of_keywords(const Json& schema, const std::string& ptr) const;
  std::string gen_typed(const Json& schema, const std::string& type, const std::string& ptr, int depth,
                        std::string_view hint);
  void check_left_recursion() const;

  // json_schema_combine.cc
  Json merge_parts(const std::vector<const Json*>& parts, const std::string& ptr, int depth) const;
  std::string gen_all_of(const Json& schema, const std::string& ptr, int depth, std::string_view hint);
  std::string gen_any_of(const Json& schema, const std::string& ptr, int depth, std::string_view hint);
  std::string gen_ref_with_siblings(const Json& schema, const std::string& ptr, int depth, std::string_view hint);
  unsigned types_of(const Json& schema, int depth) const;
  bool disjoint(const Json& a, const Json& b, int depth) const;
  const Json& deref(const Json& schema, int depth) const;

  // json_schema_object.cc
  std::string gen_object(const Json& schema, const std::string& ptr, int depth, std::string_view hint);
  std::string gen_array(const Json& schema, const std::string& ptr, int depth, std::string_view hint);

  // json_schema_string.cc
  std::string gen_string(const Json& schema, const std::string& ptr);
  std::string gen_format(const std::string& format, const std::string& ptr, int64_t min_len, int64_t max_len);
  std::string gen_literals(const Json& schema, const std::string& ptr, std::string_view hint);
  std::string primitive(const std::string& what);  // value object array string number ws char

  // json_schema_number.cc
  std::string gen_integer(const Json& schema, const std::string& ptr);
  std::string gen_number(const Json& schema, const std::string& ptr);

  // Reads a non-negative integer keyword (minLength ...) bounded by max_repetition; -1 if absent.
  int64_t count_keyword(const Json& schema, const char* key, const std::string& ptr) const;

  const Json& root_;
  const GrammarLimits& limits_;
  const Deadline& deadline_;
  RuleSink sink_;
  std::map<std::string, std::string> ref_rules_;   // target pointer -> rule name
  std::map<std::string, std::string> rule_ptrs_;   // rule name -> target pointer
  std::map<std::string, std::string> primitives_;  // "value", "ws" ... -> rule name
  // Plain strings by (minLength, maxLength): one rule each, so that the
  // parser expands a long {m,n} once however often the bounds recur.
  std::map<std::pair<int64_t, int64_t>, std::string> string_rules_;
  // Left-corner edges: rule -> rules it can begin with, for the
  // left-recursion check ($ref cycles that read no character).
  std::map<std::string, std::set<std::string>> left_edges_;
  std::string current_rule_;
  bool at_start_ = true;
};

// Marks that the expression being built has read a character (the opening
// quote or bracket), so a $ref below cannot be a left-recursive one.
class AtStartGuard {
 public:
  explicit AtStartGuard(SchemaConverter& c) : c_(c), saved_(c.at_start_) { c.at_start_ = false; }
  ~AtStartGuard() { c_.at_start_ = saved_; }
  AtStartGuard(const AtStartGuard&) = delete;
  AtStartGuard& operator=(const AtStartGuard&) = delete;

 private:
  SchemaConverter& c_;
  bool saved_;
};

}  // namespace tokenmill::grammar
