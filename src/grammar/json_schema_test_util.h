// Helpers for the converter tests: they check the language a schema or
// regex produces (texts accepted and rejected by the parsed grammar), never
// the GBNF text, so a test fails when the language is wrong and survives
// any rewrite of the generated rules.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar/text_match.h"
#include "util/error.h"

namespace tokenmill::grammar::testing {

// Generous: the tests also run under sanitizers and emulation.
inline constexpr std::chrono::milliseconds kTestBudget{60000};

struct Language {
  std::string gbnf;
  Grammar grammar;
  bool accepts(std::string_view text) const { return grammar_accepts(grammar, text); }
};

inline Language gbnf_language(std::string gbnf, const GrammarLimits& limits = {}) {
  Language out;
  out.gbnf = std::move(gbnf);
  try {
    out.grammar = parse_gbnf(out.gbnf, limits, Deadline(kTestBudget));
  } catch (const Error& e) {
    ADD_FAILURE() << "generated GBNF does not parse: " << e.what() << "\n" << out.gbnf;
  }
  return out;
}

inline Language schema_language(std::string_view schema, const GrammarLimits& limits = {}) {
  return gbnf_language(json_schema_to_gbnf(nlohmann::ordered_json::parse(schema), limits, Deadline(kTestBudget)),
                       limits);
}

inline Language regex_language(std::string_view regex, const RegexOptions& options = {},
                               const GrammarLimits& limits = {}) {
  return gbnf_language(regex_rules(regex, "root", limits, Deadline(kTestBudget), options), limits);
}

// Every text in `yes` accepted, every text in `no` rejected; a failure
// names the text and shows the grammar.
inline void expect_language(const Language& lang, std::initializer_list<std::string_view> yes,
                            std::initializer_list<std::string_view> no) {
  for (std::string_view t : yes) EXPECT_TRUE(lang.accepts(t)) << "should accept: " << t << "\n" << lang.gbnf;
  for (std::string_view t : no) EXPECT_FALSE(lang.accepts(t)) << "should reject: " << t << "\n" << lang.gbnf;
}

// For EXPECT_TRUE: `text` contains `part`.
inline ::testing::AssertionResult contains(const std::string& text, std::string_view part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// The message of the tokenmill::Error converting `schema` throws ("" if none).
inline std::string schema_error(std::string_view schema, const GrammarLimits& limits = {}) {
  try {
    json_schema_to_gbnf(nlohmann::ordered_json::parse(schema), limits, Deadline(kTestBudget));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline std::string regex_error(std::string_view regex, const RegexOptions& options = {},
                               const GrammarLimits& limits = {}) {
  try {
    regex_rules(regex, "root", limits, Deadline(kTestBudget), options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tokenmill::grammar::testing
