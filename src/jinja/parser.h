// Recursive-descent parser from tokens to the node tree. Nesting (of
// expressions and of blocks) is bounded so that hostile input such as
// "((((((..." is a syntax error, not a stack overflow.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace tokenmill::jinja {

struct Program {
  std::string source;
  StmtList body;
};

inline constexpr int kMaxParseDepth = 128;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}
  StmtList parse_template();

  // Expressions (parser_expressions.cc).
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_tuple_or_expression();

 private:
  const Token& peek(size_t ahead = 0) const;
  const Token& next();
  bool at_op(std::string_view op) const;
  bool at_name(std::string_view name) const;
  bool skip_op(std::string_view op);
  bool skip_name(std::string_view name);
  void expect_op(std::string_view op);
  std::string expect_name();
  [[noreturn]] void error(const Token& at, const std::string& message) const;
  template <typename T>
  std::unique_ptr<T> node(const Token& at) const {
    auto n = std::make_unique<T>();
    n->line = at.line;
    n->column = at.column;
    return n;
  }

  // Statements (parser.cc): parse until one of `ends` opens a block tag.
  StmtList parse_body(std::initializer_list<std::string_view> ends);
  StmtPtr parse_statement();
  StmtPtr parse_if(const Token& at);
  StmtPtr parse_for(const Token& at);
  StmtPtr parse_set(const Token& at);
  StmtPtr parse_macro(const Token& at);
  StmtPtr parse_call_block(const Token& at);
  // The body of a macro or call block up to `end_tag`, with the varargs /
  // kwargs it uses.
  void parse_macro_body(MacroStmt& m, const char* end_tag);
  StmtPtr parse_filter_block(const Token& at);
  std::vector<std::pair<std::string, ExprPtr>> parse_params();
  std::unique_ptr<FilterExpr> parse_filter_call(ExprPtr value);
  void expect_block_end();
  void expect_end_tag(std::string_view name);

  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node, const Token& at);
  ExprPtr parse_call(ExprPtr callee, const Token& at);
  ExprPtr parse_test(ExprPtr node, const Token& at);
  ExprPtr parse_list_or_tuple(const Token& at, std::string_view close, bool tuple);
  ExprPtr parse_dict(const Token& at);
  void parse_args(ArgExprs& args);
  ExprPtr binary(const Token& at, std::string op, ExprPtr lhs, ExprPtr rhs) const;

  // Counts nesting of parse calls; exceeding kMaxParseDepth is a syntax error.
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser);
    ~DepthGuard() { --p.depth_; }
  };

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  bool saw_varargs_ = false;  // a `varargs` / `kwargs` name inside the macro being parsed
  bool saw_kwargs_ = false;
};

}  // namespace tokenmill::jinja
