// Expression grammar, in jinja2's precedence order (lowest first):
// conditional, or, and, not, comparisons/in, + -, ~, * / // %, **,
// unary - +, then postfix (.attr, [key], [a:b], call) and filters/tests.
#include "jinja/parser.h"

namespace tokenmill::jinja {

ExprPtr Parser::binary(const Token& at, std::string op, ExprPtr lhs, ExprPtr rhs) const {
  auto n = node<BinaryExpr>(at);
  n->op = std::move(op);
  n->lhs = std::move(lhs);
  n->rhs = std::move(rhs);
  return n;
}

ExprPtr Parser::parse_tuple_or_expression() {
  const Token& at = peek();
  ExprPtr first = parse_expression();
  if (!at_op(",")) return first;
  auto tuple = node<ListExpr>(at);
  tuple->is_tuple = true;
  tuple->items.push_back(std::move(first));
  while (skip_op(",")) {
    const TokenType t = peek().type;
    if (t == TokenType::kVarEnd || t == TokenType::kBlockEnd || at_op(")")) break;
    tuple->items.push_back(parse_expression());
  }
  return tuple;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this);
  ExprPtr expr = parse_or();
  if (!with_condexpr) return expr;
  while (at_name("if")) {
    auto cond = node<CondExpr>(next());
    cond->condition = parse_or();
    if (skip_name("else")) cond->else_value = parse_expression();
    cond->then_value = std::move(expr);
    expr = std::move(cond);
  }
  return expr;
}

ExprPtr Parser::parse_or() {
  ExprPtr lhs = parse_and();
  while (at_name("or")) {
    const Token& at = next();
    lhs = binary(at, "or", std::move(lhs), parse_and());
  }
  return lhs;
}

ExprPtr Parser::parse_and() {
  ExprPtr lhs = parse_not();
  while (at_name("and")) {
    const Token& at = next();
    lhs = binary(at, "and", std::move(lhs), parse_not());
  }
  return lhs;
}

ExprPtr Parser::parse_not() {
  if (!at_name("not")) return parse_compare();
  DepthGuard guard(*this);
  auto n = node<UnaryExpr>(next());
  n->op = "not";
  n->operand = parse_not();
  return n;
}

ExprPtr Parser::parse_compare() {
  const Token& at = peek();
  ExprPtr first = parse_math1();
  std::vector<std::pair<std::string, ExprPtr>> rest;
  while (true) {
    const Token& t = peek();
    std::string op;
    if (t.type == TokenType::kOperator &&
        (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" || t.text == "<=" || t.text == ">=")) {
      op = next().text;
    } else if (skip_name("in")) {
      op = "in";
    } else if (at_name("not") && peek(1).type == TokenType::kName && peek(1).text == "in") {
      next();
      next();
      op = "not in";
    } else {
      break;
    }
    rest.emplace_back(std::move(op), parse_math1());
  }
  if (rest.empty()) return first;
  auto n = node<CompareExpr>(at);
  n->first = std::move(first);
  n->rest = std::move(rest);
  return n;
}

ExprPtr Parser::parse_math1() {
  ExprPtr lhs = parse_concat();
  while (at_op("+") || at_op("-")) {
    const Token& at = next();
    lhs = binary(at, at.text, std::move(lhs), parse_concat());
  }
  return lhs;
}

ExprPtr Parser::parse_concat() {
  ExprPtr lhs = parse_math2();
  while (at_op("~")) {
    const Token& at = next();
    lhs = binary(at, "~", std::move(lhs), parse_math2());
  }
  return lhs;
}

ExprPtr Parser::parse_math2() {
  ExprPtr lhs = parse_pow();
  while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
    const Token& at = next();
    lhs = binary(at, at.text, std::move(lhs), parse_pow());
  }
  return lhs;
}

ExprPtr Parser::parse_pow() {
  ExprPtr lhs = parse_unary(true);
  while (at_op("**")) {
    const Token& at = next();
    lhs = binary(at, "**", std::move(lhs), parse_unary(true));
  }
  return lhs;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr expr;
  if (at_op("-") || at_op("+")) {
    auto n = node<UnaryExpr>(peek());
    n->op = next().text;
    n->operand = parse_unary(false);
    expr = std::move(n);
  } else {
    expr = parse_primary();
  }
  expr = parse_postfix(std::move(expr));
  return with_filter ? parse_filter_expr(std::move(expr)) : std::move(expr);
}

namespace {

Value literal_for_name(const std::string& name, bool& is_literal) {
  is_literal = true;
  if (name == "true" || name == "True") return Value::boolean(true);
  if (name == "false" || name == "False") return Value::boolean(false);
  if (name == "none" || name == "None") return Value::none();
  is_literal = false;
  return Value::undefined();
}

}  // namespace

ExprPtr Parser::parse_primary() {
  const Token& t = peek();
  if (t.type == TokenType::kName) {
    next();
    bool is_literal;
    Value v = literal_for_name(t.text, is_literal);
    if (is_literal) {
      auto n = node<LiteralExpr>(t);
      n->value = std::move(v);
      return n;
    }
    auto n = node<NameExpr>(t);
    n->name = t.text;
    saw_varargs_ = saw_varargs_ || t.text == "varargs";
    saw_kwargs_ = saw_kwargs_ || t.text == "kwargs";
    return n;
  }
  if (t.type == TokenType::kString) {
    auto n = node<LiteralExpr>(t);
    std::string s;
    while (peek().type == TokenType::kString) s += next().text;
    n->value = Value::string(std::move(s));
    return n;
  }
  if (t.type == TokenType::kInt || t.type == TokenType::kFloat) {
    auto n = node<LiteralExpr>(next());
    n->value = t.type == TokenType::kInt ? Value::integer(t.int_value) : Value::floating(t.float_value);
    return n;
  }
  if (at_op("(")) {
    next();
    if (skip_op(")")) return parse_list_or_tuple(t, "", true);
    ExprPtr inner = parse_expression();
    if (at_op(",")) {
      auto tuple = node<ListExpr>(t);
      tuple->is_tuple = true;
      tuple->items.push_back(std::move(inner));
      while (skip_op(",") && !at_op(")")) tuple->items.push_back(parse_expression());
      inner = std::move(tuple);
    }
    expect_op(")");
    return inner;
  }
  if (at_op("[")) {
    next();
    return parse_list_or_tuple(t, "]", false);
  }
  if (at_op("{")) {
    next();
    return parse_dict(t);
  }
  error(t, "unexpected " + (t.type == TokenType::kOperator ? "'" + t.text + "'" : std::string("token")));
}

ExprPtr Parser::parse_list_or_tuple(const Token& at, std::string_view close, bool tuple) {
  auto n = node<ListExpr>(at);
  n->is_tuple = tuple;
  if (close.empty()) return n;
  while (!at_op(close)) {
    if (!n->items.empty()) expect_op(",");
    if (at_op(close)) break;
    n->items.push_back(parse_expression());
  }
  next();
  return n;
}

ExprPtr Parser::parse_dict(const Token& at) {
  auto n = node<DictExpr>(at);
  while (!at_op("}")) {
    if (!n->entries.empty()) expect_op(",");
    if (at_op("}")) break;
    ExprPtr key = parse_expression();
    expect_op(":");
    n->entries.emplace_back(std::move(key), parse_expression());
  }
  next();
  return n;
}

ExprPtr Parser::parse_postfix(ExprPtr expr) {
  while (true) {
    const Token& at = peek();
    if (at_op(".")) {
      next();
      if (peek().type == TokenType::kInt) {
        auto n = node<GetitemExpr>(at);
        auto key = node<LiteralExpr>(peek());
        key->value = Value::integer(next().int_value);
        n->object = std::move(expr);
        n->key = std::move(key);
        expr = std::move(n);
        continue;
      }
      auto n = node<GetattrExpr>(at);
      n->object = std::move(expr);
      n->name = expect_name();
      expr = std::move(n);
    } else if (at_op("[")) {
      next();
      expr = parse_subscript(std::move(expr), at);
    } else if (at_op("(")) {
      expr = parse_call(std::move(expr), at);
    } else {
      return expr;
    }
  }
}

ExprPtr Parser::parse_call(ExprPtr callee, const Token& at) {
  auto n = node<CallExpr>(at);
  n->callee = std::move(callee);
  parse_args(n->args);
  return n;
}

ExprPtr Parser::parse_subscript(ExprPtr object, const Token& at) {
  ExprPtr start;
  if (!at_op(":")) start = parse_expression();
  if (!at_op(":")) {
    expect_op("]");
    auto n = node<GetitemExpr>(at);
    n->object = std::move(object);
    n->key = std::move(start);
    return n;
  }
  next();
  auto n = node<SliceExpr>(at);
  n->object = std::move(object);
  n->start = std::move(start);
  if (!at_op("]") && !at_op(":")) n->stop = parse_expression();
  if (skip_op(":") && !at_op("]")) n->step = parse_expression();
  expect_op("]");
  return n;
}

std::unique_ptr<FilterExpr> Parser::parse_filter_call(ExprPtr value) {
  auto n = node<FilterExpr>(peek());
  n->value = std::move(value);
  n->name = expect_name();
  while (skip_op(".")) n->name += "." + expect_name();
  if (at_op("(")) parse_args(n->args);
  return n;
}

ExprPtr Parser::parse_filter_expr(ExprPtr expr) {
  while (true) {
    const Token& at = peek();
    if (at_op("|")) {
      next();
      expr = parse_filter_call(std::move(expr));
    } else if (at_name("is")) {
      next();
      expr = parse_test(std::move(expr), at);
    } else if (at_op("(")) {
      expr = parse_call(std::move(expr), at);
    } else {
      return expr;
    }
  }
}

ExprPtr Parser::parse_test(ExprPtr value, const Token& at) {
  auto n = node<TestExpr>(at);
  n->value = std::move(value);
  n->negated = skip_name("not");
  n->name = expect_name();
  while (skip_op(".")) n->name += "." + expect_name();
  const Token& t = peek();
  const bool primary_start = t.type == TokenType::kName || t.type == TokenType::kString || t.type == TokenType::kInt ||
                             t.type == TokenType::kFloat || at_op("[") || at_op("{");
  if (at_op("(")) {
    parse_args(n->args);
  } else if (primary_start && !at_name("else") && !at_name("or") && !at_name("and")) {
    if (at_name("is")) error(t, "You cannot chain multiple tests with is");
    n->args.positional.push_back(parse_postfix(parse_primary()));
  }
  return n;
}

void Parser::parse_args(ArgExprs& args) {
  DepthGuard guard(*this);
  expect_op("(");
  bool first = true;
  while (!at_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (at_op(")")) break;
    if (peek().type == TokenType::kName && peek(1).type == TokenType::kOperator && peek(1).text == "=") {
      std::string name = next().text;
      next();
      args.keywords.emplace_back(std::move(name), parse_expression());
    } else {
      if (!args.keywords.empty()) error(peek(), "positional argument follows keyword argument");
      args.positional.push_back(parse_expression());
    }
  }
  next();
}

}  // namespace tokenmill::jinja
