// Splits template source into text and tag tokens, applying jinja2's
// whitespace control ({%- -%}, trim_blocks, lstrip_blocks, {%+) and raw
// blocks, so the parser sees the exact text that will be printed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "jinja/template.h"

namespace tokenmill::jinja {

enum class TokenType {
  kText,
  kVarBegin,
  kVarEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInt,
  kFloat,
  kOperator,
  kEof
};

struct Token {
  TokenType type;
  std::string text;  // the text, name, operator or decoded string literal
  int line = 1;
  int column = 1;
  int64_t int_value = 0;
  double float_value = 0;
};

// Throws TemplateError(kSyntax).
std::vector<Token> tokenize(std::string_view source, const ParseOptions& options);

[[noreturn]] void throw_error(ErrorKind kind, int line, int column, const std::string& message);

}  // namespace tokenmill::jinja
