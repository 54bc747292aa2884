// Expression nodes: Python's operator semantics on template values.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "jinja/render.h"
#include "jinja/string_util.h"

namespace tokenmill::jinja {
namespace {

int64_t int_of(const Value& v) { return v.kind == Value::Kind::kBool ? v.b : v.i; }
bool is_integral(const Value& v) { return v.kind == Value::Kind::kInt || v.kind == Value::Kind::kBool; }

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_render(undefined_message(a));
  if (b.is_undefined()) fail_render(undefined_message(b));
  fail_render(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name()));
}

// Python ints do not overflow; ours are 64-bit, so an overflow is an error rather than a wrong number.
template <typename Op>
Value checked_int(Op op, int64_t a, int64_t b) {
  int64_t result;
  if (op(a, b, &result)) fail_render("integer overflow");
  return Value::integer(result);
}

bool add_op(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool sub_op(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mul_op(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

Value repeat(Renderer& r, const Value& seq, int64_t times) {
  if (times <= 0) return seq.is_string() ? Value::string("") : Value::new_list();
  if (seq.is_string()) {
    r.check_size(seq.s.size() * static_cast<uint64_t>(times));
    std::string out;
    out.reserve(seq.s.size() * static_cast<size_t>(times));
    for (int64_t n = 0; n < times; ++n) out += seq.s;
    return Value::string(std::move(out));
  }
  r.check_size(seq.list->items.size() * static_cast<uint64_t>(times));
  r.check_bytes(seq.list->bytes * static_cast<uint64_t>(times));
  Value out = Value::new_list();
  for (int64_t n = 0; n < times; ++n) {
    for (const Value& v : seq.list->items) push_item(out, v);
  }
  return out;
}

// Markup + str (either order) escapes the plain string, as markupsafe does.
Value add_markup(Renderer& r, const Value& a, const Value& b) {
  CallArgs none;
  const Value ea = a.markup ? a : apply_filter(r, "escape", a, none);
  const Value eb = b.markup ? b : apply_filter(r, "escape", b, none);
  r.check_size(ea.s.size() + eb.s.size());
  Value out = Value::string(ea.s + eb.s);
  out.markup = true;
  return out;
}

Value add(Renderer& r, const Value& a, const Value& b) {
  if (is_integral(a) && is_integral(b)) return checked_int(add_op, int_of(a), int_of(b));
  if (a.is_number() && b.is_number()) return Value::floating(a.as_double() + b.as_double());
  if (a.is_string() && b.is_string()) {
    if (a.markup != b.markup) return add_markup(r, a, b);
    r.check_size(a.s.size() + b.s.size());
    Value out = Value::string(a.s + b.s);
    out.markup = a.markup;
    return out;
  }
  if (a.is_list() && b.is_list() && !a.list->is_iterator && !b.list->is_iterator) {
    r.check_bytes(a.list->bytes + b.list->bytes);
    Value out = Value::new_list(a.list->items, a.list->is_tuple);
    for (const Value& v : b.list->items) push_item(out, v);
    return out;
  }
  bad_operands("+", a, b);
}

double python_fmod(double x, double y) {
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  return m;
}

Value divide(const std::string& op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) bad_operands(op, a, b);
  if (b.as_double() == 0) fail_render(op == "/" ? "division by zero" : "integer division or modulo by zero");
  if (op == "/") return Value::floating(a.as_double() / b.as_double());
  if (is_integral(a) && is_integral(b)) {
    const int64_t x = int_of(a), y = int_of(b);
    if (x == INT64_MIN && y == -1) fail_render("integer overflow");
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      --q;
      m += y;
    }
    return Value::integer(op == "//" ? q : m);
  }
  const double x = a.as_double(), y = b.as_double();
  if (op == "//") return Value::floating(std::floor(x / y));
  return Value::floating(python_fmod(x, y));
}

Value power(const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) bad_operands("**", a, b);
  if (is_integral(a) && is_integral(b) && int_of(b) >= 0) {
    int64_t result = 1, base = int_of(a);
    for (int64_t e = int_of(b); e > 0; e >>= 1) {
      if ((e & 1) && __builtin_mul_overflow(result, base, &result)) fail_render("integer overflow");
      if (e > 1 && __builtin_mul_overflow(base, base, &base)) fail_render("integer overflow");
    }
    return Value::integer(result);
  }
  return Value::floating(std::pow(a.as_double(), b.as_double()));
}

Value arithmetic(Renderer& r, const std::string& op, const Value& a, const Value& b) {
  if (op == "+") return add(r, a, b);
  if (op == "~") {
    std::string sa = to_str(a), sb = to_str(b);
    r.check_size(sa.size() + sb.size());
    return Value::string(sa + sb);
  }
  if (op == "-") {
    if (is_integral(a) && is_integral(b)) return checked_int(sub_op, int_of(a), int_of(b));
    if (a.is_number() && b.is_number()) return Value::floating(a.as_double() - b.as_double());
    bad_operands(op, a, b);
  }
  if (op == "*") {
    if (is_integral(a) && is_integral(b)) return checked_int(mul_op, int_of(a), int_of(b));
    if (a.is_number() && b.is_number()) return Value::floating(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_list()) && is_integral(b)) return repeat(r, a, int_of(b));
    if ((b.is_string() || b.is_list()) && is_integral(a)) return repeat(r, b, int_of(a));
    bad_operands(op, a, b);
  }
  if (op == "**") return power(a, b);
  if (op == "%" && a.is_string()) {
    const std::vector<Value> args = b.is_list() && b.list->is_tuple ? b.list->items : std::vector<Value>{b};
    return Value::string(percent_format(a.s, args, r.limits().max_output_bytes));
  }
  return divide(op, a, b);
}

bool compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return values_equal(a, b);
  if (op == "!=") return !values_equal(a, b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  if (a.is_undefined() || b.is_undefined()) fail_render(undefined_message(a.is_undefined() ? a : b));
  const int c = compare_values(a, b);
  if (op == "<") return c < 0;
  if (op == ">") return c > 0;
  if (op == "<=") return c <= 0;
  return c >= 0;
}

CallArgs eval_args(Renderer& r, const ArgExprs& exprs) {
  CallArgs args;
  args.positional.reserve(exprs.positional.size());
  for (const ExprPtr& e : exprs.positional) args.positional.push_back(e->eval(r));
  for (const auto& [name, e] : exprs.keywords) args.keywords.emplace_back(name, e->eval(r));
  return args;
}

}  // namespace

Value LiteralExpr::evaluate(Renderer&) const { return value; }

Value NameExpr::evaluate(Renderer& r) const { return r.lookup(name); }

Value ListExpr::evaluate(Renderer& r) const {
  Value out = Value::new_list({}, is_tuple);
  out.list->items.reserve(items.size());
  for (const ExprPtr& e : items) {
    push_item(out, e->eval(r));
    out.list->depth = std::max(out.list->depth, out.list->items.back().depth() + 1);
  }
  r.check_nesting(out.list->depth);
  r.check_bytes(out.list->bytes);
  return out;
}

Value DictExpr::evaluate(Renderer& r) const {
  Value out = Value::new_dict();
  for (const auto& [k, v] : entries) {
    Value key = k->eval(r);
    Value value = v->eval(r);
    out.dict->depth = std::max({out.dict->depth, key.depth() + 1, value.depth() + 1});
    out.dict->set(std::move(key), std::move(value));
  }
  r.check_nesting(out.dict->depth);
  r.check_bytes(out.dict->bytes);
  return out;
}

Value UnaryExpr::evaluate(Renderer& r) const {
  Value v = operand->eval(r);
  if (op == "not") return Value::boolean(!v.truthy());
  if (!v.is_number()) fail_render(fmt::format("bad operand type for unary {}: '{}'", op, v.type_name()));
  if (op == "+") return v.kind == Value::Kind::kBool ? Value::integer(v.b) : v;
  if (v.kind == Value::Kind::kFloat) return Value::floating(-v.f);
  if (int_of(v) == INT64_MIN) fail_render("integer overflow");
  return Value::integer(-int_of(v));
}

Value BinaryExpr::evaluate(Renderer& r) const {
  Value a = lhs->eval(r);
  if (op == "and") return a.truthy() ? rhs->eval(r) : a;
  if (op == "or") return a.truthy() ? a : rhs->eval(r);
  return arithmetic(r, op, a, rhs->eval(r));
}

Value CompareExpr::evaluate(Renderer& r) const {
  Value a = first->eval(r);
  for (const auto& [op, e] : rest) {
    Value b = e->eval(r);
    if (!compare(op, a, b)) return Value::boolean(false);
    a = std::move(b);
  }
  return Value::boolean(true);
}

Value GetattrExpr::evaluate(Renderer& r) const { return get_attribute(object->eval(r), name); }

Value GetitemExpr::evaluate(Renderer& r) const {
  Value obj = object->eval(r);
  return get_item(obj, key->eval(r));
}

Value SliceExpr::evaluate(Renderer& r) const {
  Value obj = object->eval(r);
  Value a = start ? start->eval(r) : Value::none();
  Value b = stop ? stop->eval(r) : Value::none();
  Value c = step ? step->eval(r) : Value::none();
  return slice_value(obj, a, b, c);
}

// A list or dict a call or filter made (str.split, |list, ...) counts
// against the bound of any container, as literals and `+` do.
Value checked_size(Renderer& r, Value v) {
  if (v.is_list()) r.check_bytes(v.list->bytes);
  if (v.is_dict()) r.check_bytes(v.dict->bytes);
  return v;
}

Value CallExpr::evaluate(Renderer& r) const {
  Value fn = callee->eval(r);
  CallArgs args = eval_args(r, this->args);
  args.line = line;
  args.column = column;
  return checked_size(r, r.call(fn, args));
}

Value FilterExpr::apply(Renderer& r, Value input) const {
  CallArgs call_args = eval_args(r, args);
  return checked_size(r, apply_filter(r, name, input, call_args));
}

Value FilterExpr::evaluate(Renderer& r) const { return apply(r, value->eval(r)); }

Value TestExpr::evaluate(Renderer& r) const {
  Value v = value->eval(r);
  CallArgs call_args = eval_args(r, args);
  return Value::boolean(apply_test(r, name, v, call_args) != negated);
}

Value CondExpr::evaluate(Renderer& r) const {
  if (condition->eval(r).truthy()) return then_value->eval(r);
  return else_value ? else_value->eval(r) : make_undefined("the inline if-expression had no else");
}

}  // namespace tokenmill::jinja
