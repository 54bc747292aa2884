// The parsed template: expression and statement nodes. A node evaluates
// itself against a Renderer (render.cc, render_statements.cc); the tree is
// immutable after parsing, so one Program serves concurrent renders.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace tokenmill::jinja {

struct Node {
  int line = 0;
  int column = 0;
  virtual ~Node() = default;
};

struct Expr : Node {
  // Counts a step, then evaluates; errors without a location get this node's.
  Value eval(Renderer& r) const;

 protected:
  virtual Value evaluate(Renderer& r) const = 0;
};
using ExprPtr = std::unique_ptr<Expr>;

struct ArgExprs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
};

struct LiteralExpr : Expr {
  Value value;
  Value evaluate(Renderer& r) const override;
};

struct NameExpr : Expr {
  std::string name;
  Value evaluate(Renderer& r) const override;
};

struct ListExpr : Expr {
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  Value evaluate(Renderer& r) const override;
};

struct DictExpr : Expr {
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
  Value evaluate(Renderer& r) const override;
};

struct UnaryExpr : Expr {
  std::string op;  // "not", "-", "+"
  ExprPtr operand;
  Value evaluate(Renderer& r) const override;
};

struct BinaryExpr : Expr {
  std::string op;  // + - * / // % ** ~ and or
  ExprPtr lhs, rhs;
  Value evaluate(Renderer& r) const override;
};

struct CompareExpr : Expr {
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> rest;  // == != < > <= >= in "not in"
  Value evaluate(Renderer& r) const override;
};

struct GetattrExpr : Expr {
  ExprPtr object;
  std::string name;
  Value evaluate(Renderer& r) const override;
};

struct GetitemExpr : Expr {
  ExprPtr object, key;
  Value evaluate(Renderer& r) const override;
};

struct SliceExpr : Expr {
  ExprPtr object, start, stop, step;  // any of the last three may be null
  Value evaluate(Renderer& r) const override;
};

struct CallExpr : Expr {
  ExprPtr callee;
  ArgExprs args;
  Value evaluate(Renderer& r) const override;
};

struct FilterExpr : Expr {
  ExprPtr value;  // null inside {% filter %} blocks, where the body is the value
  std::string name;
  ArgExprs args;
  Value evaluate(Renderer& r) const override;
  Value apply(Renderer& r, Value input) const;
};

struct TestExpr : Expr {
  ExprPtr value;
  std::string name;
  ArgExprs args;
  bool negated = false;
  Value evaluate(Renderer& r) const override;
};

struct CondExpr : Expr {
  ExprPtr condition, then_value, else_value;  // else_value may be null: undefined
  Value evaluate(Renderer& r) const override;
};

struct Stmt : Node {
  virtual void exec(Renderer& r) const = 0;
};
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

struct TextStmt : Stmt {
  std::string text;
  void exec(Renderer& r) const override;
};

struct PrintStmt : Stmt {
  ExprPtr value;
  void exec(Renderer& r) const override;
};

struct BlockStmt : Stmt {  // {% generation %}: its body, rendered in place
  StmtList body;
  void exec(Renderer& r) const override;
};

struct IfStmt : Stmt {
  std::vector<std::pair<ExprPtr, StmtList>> branches;
  StmtList else_body;
  void exec(Renderer& r) const override;
};

struct ForStmt : Stmt {
  std::vector<std::string> targets;
  ExprPtr iterable, filter;
  StmtList body, else_body;
  void exec(Renderer& r) const override;
};

struct SetStmt : Stmt {
  std::vector<std::string> targets;  // several: tuple unpacking
  std::string attribute;             // set ns.attr: targets[0] is the namespace
  ExprPtr value;                     // null for a block set
  StmtList body;
  std::vector<std::unique_ptr<FilterExpr>> filters;  // {% set x | trim %}...{% endset %}
  void exec(Renderer& r) const override;
};

struct MacroStmt : Stmt {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  StmtList body;
  // The body reads `varargs` / `kwargs`: extra arguments are collected there,
  // otherwise they are an error (as jinja2 decides from the macro's body).
  bool takes_varargs = false;
  bool takes_kwargs = false;
  void exec(Renderer& r) const override;
};

struct CallBlockStmt : Stmt {
  std::unique_ptr<CallExpr> call;
  std::vector<std::pair<std::string, ExprPtr>> caller_params;
  std::shared_ptr<MacroStmt> caller;  // the body, as a macro named "caller"
  void exec(Renderer& r) const override;
};

struct FilterBlockStmt : Stmt {
  std::vector<std::unique_ptr<FilterExpr>> filters;
  StmtList body;
  void exec(Renderer& r) const override;
};

struct LoopControlStmt : Stmt {
  bool is_break = false;
  void exec(Renderer& r) const override;
};

}  // namespace tokenmill::jinja
