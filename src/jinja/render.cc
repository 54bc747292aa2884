#include "jinja/render.h"

#include <fmt/format.h>

#include <algorithm>

namespace tokenmill::jinja {

void fail_render(const std::string& message) { throw TemplateError(ErrorKind::kRender, 0, 0, message); }
void fail_limit(const std::string& message) { throw TemplateError(ErrorKind::kLimit, 0, 0, message); }

Value make_undefined(const std::string& hint) {
  Value v;
  v.s = hint;
  return v;
}

std::string undefined_message(const Value& v) { return v.s.empty() ? "value is undefined" : v.s; }

Renderer::Renderer(const nlohmann::ordered_json& context, const Limits& limits)
    : limits_(limits),
      context_(Value::from_json(context)),
      start_(std::chrono::steady_clock::now()),
      print_limit_(limits.max_output_bytes) {
  if (!context_.is_dict()) context_ = Value::new_dict();
  frames_.resize(8);
  num_frames_ = 1;
}

Renderer::~Renderer() {
  for (const auto& weak : namespaces_) {
    if (const std::shared_ptr<Dict> ns = weak.lock()) ns->entries.clear();
  }
}

std::string Renderer::run(const StmtList& body) { return capture(body); }

void Renderer::check_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes) {
    fail_limit(fmt::format("the output would exceed max_output_bytes ({} bytes)", limits_.max_output_bytes));
  }
}

void Renderer::check_nesting(int depth) const {
  if (depth > limits_.max_depth) fail_limit(fmt::format("values nest deeper than max_depth ({})", limits_.max_depth));
}

void Renderer::check_bytes(size_t bytes) const {
  if (container_bytes_exceed(bytes, limits_.max_output_bytes))
    fail_limit("a list or dict would hold more than 4 x max_output_bytes");
}

void Renderer::write(std::string_view text) {
  check_size(out_->size() + text.size());
  out_->append(text);
}

void Renderer::check_time() const {
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
  if (elapsed.count() > limits_.max_seconds) fail_limit("the render took longer than max_seconds");
}

std::string Renderer::capture(const StmtList& body) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec_body(body);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

void Renderer::exec_body(const StmtList& body) {
  for (const StmtPtr& s : body) {
    tick();
    try {
      s->exec(*this);
    } catch (const TemplateError& e) {
      if (e.line() != 0) throw;
      throw TemplateError(e.kind(), s->line, s->column, e.detail());
    } catch (const std::length_error& e) {
      throw TemplateError(ErrorKind::kLimit, s->line, s->column, e.what());
    } catch (const std::logic_error& e) {  // invalid_argument, out_of_range: a bad operand
      throw TemplateError(ErrorKind::kRender, s->line, s->column, e.what());
    }
    if (flow != Flow::kNormal) return;
  }
}

Value Renderer::lookup(const std::string& name) const {
  for (size_t n = num_frames_; n-- > floor_;) {
    for (const auto& [k, v] : frames_[n]) {
      if (k == name) return v;
    }
  }
  if (floor_ > 0) {
    for (const auto& [k, v] : frames_[0]) {
      if (k == name) return v;
    }
  }
  if (const Value* v = context_.dict->find(std::string_view(name))) return *v;
  Value g = lookup_global(name);
  if (!g.is_undefined()) return g;
  return make_undefined("'" + name + "' is undefined");
}

void Renderer::assign(const std::string& name, Value value) {
  Frame& frame = frames_[num_frames_ - 1];
  for (auto& [k, v] : frame) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  frame.emplace_back(name, std::move(value));
}

void Renderer::push_frame() {
  if (num_frames_ == frames_.size()) frames_.emplace_back();
  frames_[num_frames_++].clear();
}

void Renderer::pop_frame() { frames_[--num_frames_].clear(); }

void Renderer::enter_call() {
  if (++depth_ > limits_.max_depth) {
    --depth_;
    fail_limit(fmt::format("calls nest deeper than max_depth ({})", limits_.max_depth));
  }
}

Value Renderer::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_render(undefined_message(callee));
  if (!callee.is_callable()) fail_render(fmt::format("'{}' object is not callable", callee.type_name()));
  return callee.callable->fn(*this, args);
}

void Renderer::bind_macro_args(const MacroStmt& macro, CallArgs& args) {
  const size_t num_params = macro.params.size();
  if (args.positional.size() > num_params && !macro.takes_varargs) {
    fail_render(fmt::format("macro '{}' takes not more than {} argument(s)", macro.name, num_params));
  }
  for (size_t n = 0; n < num_params; ++n) {
    const auto& [name, def] = macro.params[n];
    Value v = args.get(n, name);
    if (!args.has(n, name) && def) v = def->eval(*this);
    assign(name, std::move(v));
  }
  Value kwargs = Value::new_dict();
  for (auto& keyword : args.keywords) {
    const std::string& name = keyword.first;  // a named reference: clang cannot capture structured bindings
    const Value& v = keyword.second;
    const bool is_param =
        std::any_of(macro.params.begin(), macro.params.end(), [&](const auto& p) { return p.first == name; });
    if (name == "caller") {
      assign(name, v);
    } else if (!is_param) {
      if (!macro.takes_kwargs) fail_render(fmt::format("macro '{}' takes no keyword argument '{}'", macro.name, name));
      kwargs.dict->set(Value::string(name), v);
    }
  }
  if (macro.takes_kwargs) assign("kwargs", std::move(kwargs));
  if (macro.takes_varargs) {
    std::vector<Value> extra;
    for (size_t n = num_params; n < args.positional.size(); ++n) extra.push_back(args.positional[n]);
    assign("varargs", Value::new_list(std::move(extra), true));
  }
}

Value Renderer::call_macro(const MacroStmt& macro, CallArgs& args, bool isolated) {
  enter_call();
  const size_t saved_floor = floor_;
  const Flow saved_flow = flow;
  push_frame();
  if (isolated) floor_ = num_frames_ - 1;
  struct Restore {
    Renderer& r;
    size_t floor;
    Flow flow;
    ~Restore() {
      r.pop_frame();
      r.floor_ = floor;
      r.flow = flow;
      r.leave_call();
    }
  } restore{*this, saved_floor, saved_flow};
  bind_macro_args(macro, args);
  flow = Flow::kNormal;
  return Value::string(capture(macro.body));
}

Value Renderer::call_caller(const MacroStmt& body, CallArgs& args, size_t call_site_top, size_t call_site_floor) {
  if (call_site_top > num_frames_ || call_site_floor > call_site_top) fail_render("caller() outside its call block");
  // Set the macro's frames aside; the call site's become the innermost again.
  std::vector<Frame> hidden;
  for (size_t n = call_site_top; n < num_frames_; ++n) hidden.push_back(std::move(frames_[n]));
  const size_t saved_top = num_frames_, saved_floor = floor_;
  num_frames_ = call_site_top;
  floor_ = call_site_floor;
  struct Restore {
    Renderer& r;
    std::vector<Frame>& hidden;
    size_t top, floor;
    ~Restore() {
      for (size_t n = 0; n < hidden.size(); ++n) r.frames_[r.num_frames_ + n] = std::move(hidden[n]);
      r.num_frames_ = top;
      r.floor_ = floor;
    }
  } restore{*this, hidden, saved_top, saved_floor};
  return call_macro(body, args, /*isolated=*/false);
}

Value Expr::eval(Renderer& r) const {
  r.tick();
  try {
    return evaluate(r);
  } catch (const TemplateError& e) {
    if (e.line() != 0) throw;
    throw TemplateError(e.kind(), line, column, e.detail());
  } catch (const std::length_error& e) {
    throw TemplateError(ErrorKind::kLimit, line, column, e.what());
  } catch (const std::logic_error& e) {  // invalid_argument, out_of_range: a bad operand
    throw TemplateError(ErrorKind::kRender, line, column, e.what());
  }
}

}  // namespace tokenmill::jinja
