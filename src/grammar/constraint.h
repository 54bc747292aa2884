// What a request asks its output to satisfy, as the API received it. The
// server turns response_format, tools and the regex/grammar extensions into
// one ConstraintSpec; GrammarCompiler turns it into a CompiledGrammar.
#pragma once
#include <string>

namespace tokenmill::grammar {

enum class ConstraintKind {
  kJsonObject,  // any JSON object; text unused
  kJsonSchema,  // text: the schema, as JSON text
  kRegex,       // text: the expression (matched in full)
  kGbnf,        // text: a complete GBNF grammar with a `root` rule
};

struct ConstraintSpec {
  ConstraintKind kind = ConstraintKind::kGbnf;
  std::string text;
};

const char* constraint_kind_name(ConstraintKind kind);

}  // namespace tokenmill::grammar
