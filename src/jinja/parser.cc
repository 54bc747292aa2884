#include "jinja/parser.h"

namespace tokenmill::jinja {

Parser::DepthGuard::DepthGuard(Parser& parser) : p(parser) {
  if (++p.depth_ > kMaxParseDepth) p.error(p.peek(), "the template nests too deeply");
}

const Token& Parser::peek(size_t ahead) const {
  const size_t n = pos_ + ahead;
  return n < tokens_.size() ? tokens_[n] : tokens_.back();
}

const Token& Parser::next() {
  const Token& t = peek();
  if (pos_ + 1 < tokens_.size()) ++pos_;
  return t;
}

bool Parser::at_op(std::string_view op) const { return peek().type == TokenType::kOperator && peek().text == op; }
bool Parser::at_name(std::string_view name) const { return peek().type == TokenType::kName && peek().text == name; }

bool Parser::skip_op(std::string_view op) {
  if (!at_op(op)) return false;
  next();
  return true;
}

bool Parser::skip_name(std::string_view name) {
  if (!at_name(name)) return false;
  next();
  return true;
}

namespace {

std::string describe(const Token& t) {
  switch (t.type) {
    case TokenType::kEof: return "end of template";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kVarEnd: return "end of print statement";
    case TokenType::kText: return "template text";
    case TokenType::kBlockBegin: return "begin of statement block";
    case TokenType::kVarBegin: return "begin of print statement";
    case TokenType::kString: return "string";
    default: return "'" + t.text + "'";
  }
}

}  // namespace

void Parser::error(const Token& at, const std::string& message) const {
  throw_error(ErrorKind::kSyntax, at.line, at.column, message);
}

void Parser::expect_op(std::string_view op) {
  if (!skip_op(op)) error(peek(), "expected '" + std::string(op) + "', got " + describe(peek()));
}

std::string Parser::expect_name() {
  if (peek().type != TokenType::kName) error(peek(), "expected a name, got " + describe(peek()));
  return next().text;
}

void Parser::expect_block_end() {
  if (peek().type != TokenType::kBlockEnd) error(peek(), "expected end of statement block, got " + describe(peek()));
  next();
}

void Parser::expect_end_tag(std::string_view name) {
  next();  // kBlockBegin, checked by parse_body
  if (!skip_name(name)) error(peek(), "expected '" + std::string(name) + "'");
  expect_block_end();
}

StmtList Parser::parse_template() { return parse_body({}); }

StmtList Parser::parse_body(std::initializer_list<std::string_view> ends) {
  DepthGuard guard(*this);
  StmtList body;
  while (true) {
    const Token& t = peek();
    if (t.type == TokenType::kEof) {
      if (ends.size() == 0) return body;
      error(t, "unexpected end of template, expected '" + std::string(*ends.begin()) + "'");
    }
    if (t.type == TokenType::kText) {
      auto s = node<TextStmt>(t);
      s->text = next().text;
      body.push_back(std::move(s));
    } else if (t.type == TokenType::kVarBegin) {
      auto s = node<PrintStmt>(next());
      s->value = parse_tuple_or_expression();
      if (peek().type != TokenType::kVarEnd) error(peek(), "expected end of print statement, got " + describe(peek()));
      next();
      body.push_back(std::move(s));
    } else if (t.type == TokenType::kBlockBegin) {
      const Token& name = peek(1);
      for (std::string_view end : ends) {
        if (name.type == TokenType::kName && name.text == end) return body;
      }
      body.push_back(parse_statement());
    } else {
      error(t, "unexpected " + describe(t));
    }
  }
}

StmtPtr Parser::parse_statement() {
  next();  // kBlockBegin
  const Token& at = peek();
  if (at.type != TokenType::kName) error(at, "expected a tag name, got " + describe(at));
  const std::string name = next().text;
  if (name == "if") return parse_if(at);
  if (name == "for") return parse_for(at);
  if (name == "set") return parse_set(at);
  if (name == "macro") return parse_macro(at);
  if (name == "call") return parse_call_block(at);
  if (name == "filter") return parse_filter_block(at);
  if (name == "break" || name == "continue") {
    auto s = node<LoopControlStmt>(at);
    s->is_break = name == "break";
    expect_block_end();
    return s;
  }
  if (name == "generation") {
    auto s = node<BlockStmt>(at);
    expect_block_end();
    s->body = parse_body({"endgeneration"});
    expect_end_tag("endgeneration");
    return s;
  }
  if (name == "include" || name == "extends" || name == "import" || name == "from" || name == "block") {
    error(at, "'" + name + "' is not supported in chat templates");
  }
  error(at, "unknown tag '" + name + "'");
}

StmtPtr Parser::parse_if(const Token& at) {
  auto s = node<IfStmt>(at);
  while (true) {
    ExprPtr cond = parse_expression(false);
    expect_block_end();
    StmtList body = parse_body({"elif", "else", "endif"});
    s->branches.emplace_back(std::move(cond), std::move(body));
    next();  // kBlockBegin
    const std::string tag = next().text;
    if (tag == "elif") continue;
    if (tag == "else") {
      expect_block_end();
      s->else_body = parse_body({"endif"});
      expect_end_tag("endif");
    } else {
      expect_block_end();
    }
    return s;
  }
}

StmtPtr Parser::parse_for(const Token& at) {
  auto s = node<ForStmt>(at);
  const bool paren = skip_op("(");
  do {
    s->targets.push_back(expect_name());
  } while (skip_op(","));
  if (paren) expect_op(")");
  if (!skip_name("in")) error(peek(), "expected 'in', got " + describe(peek()));
  s->iterable = parse_expression(false);
  if (skip_name("if")) s->filter = parse_expression();
  if (at_name("recursive")) error(peek(), "recursive loops are not supported");
  expect_block_end();
  s->body = parse_body({"endfor", "else"});
  if (peek(1).text == "else") {
    next();
    next();
    expect_block_end();
    s->else_body = parse_body({"endfor"});
  }
  expect_end_tag("endfor");
  return s;
}

StmtPtr Parser::parse_set(const Token& at) {
  auto s = node<SetStmt>(at);
  s->targets.push_back(expect_name());
  if (skip_op(".")) {
    s->attribute = expect_name();
  } else {
    while (skip_op(",")) s->targets.push_back(expect_name());
  }
  if (skip_op("=")) {
    s->value = parse_tuple_or_expression();
    expect_block_end();
    return s;
  }
  if (s->targets.size() > 1 || !s->attribute.empty()) error(peek(), "expected '='");
  while (skip_op("|")) s->filters.push_back(parse_filter_call(nullptr));
  expect_block_end();
  s->body = parse_body({"endset"});
  expect_end_tag("endset");
  return s;
}

std::vector<std::pair<std::string, ExprPtr>> Parser::parse_params() {
  std::vector<std::pair<std::string, ExprPtr>> params;
  expect_op("(");
  while (!at_op(")")) {
    if (!params.empty()) expect_op(",");
    if (at_op(")")) break;
    std::string name = expect_name();
    ExprPtr def;
    if (skip_op("=")) def = parse_expression();
    params.emplace_back(std::move(name), std::move(def));
  }
  next();
  return params;
}

StmtPtr Parser::parse_macro(const Token& at) {
  auto s = node<MacroStmt>(at);
  s->name = expect_name();
  s->params = parse_params();
  expect_block_end();
  parse_macro_body(*s, "endmacro");
  return s;
}

void Parser::parse_macro_body(MacroStmt& m, const char* end_tag) {
  // varargs/kwargs seen in this body belong to this macro, not the outer one.
  const bool outer_varargs = saw_varargs_, outer_kwargs = saw_kwargs_;
  saw_varargs_ = saw_kwargs_ = false;
  m.body = parse_body({end_tag});
  m.takes_varargs = saw_varargs_;
  m.takes_kwargs = saw_kwargs_;
  saw_varargs_ = outer_varargs;
  saw_kwargs_ = outer_kwargs;
  expect_end_tag(end_tag);
}

StmtPtr Parser::parse_call_block(const Token& at) {
  auto s = node<CallBlockStmt>(at);
  auto caller = node<MacroStmt>(at);
  caller->name = "caller";
  if (at_op("(")) caller->params = parse_params();
  ExprPtr call = parse_expression();
  if (dynamic_cast<CallExpr*>(call.get()) == nullptr) error(at, "expected a call after 'call'");
  s->call.reset(static_cast<CallExpr*>(call.release()));
  expect_block_end();
  parse_macro_body(*caller, "endcall");
  s->caller = std::move(caller);
  return s;
}

StmtPtr Parser::parse_filter_block(const Token& at) {
  auto s = node<FilterBlockStmt>(at);
  do {
    s->filters.push_back(parse_filter_call(nullptr));
  } while (skip_op("|"));
  expect_block_end();
  s->body = parse_body({"endfilter"});
  expect_end_tag("endfilter");
  return s;
}

}  // namespace tokenmill::jinja
