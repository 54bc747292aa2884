// One render of a Program: the output buffer, variable scopes, loop control
// and the Limits accounting. A Renderer lives for one render() call on one
// thread; the Program it walks is shared and read-only.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/parser.h"
#include "jinja/template.h"

namespace tokenmill::jinja {

// A runtime error without a location yet: the node evaluating it adds its own.
[[noreturn]] void fail_render(const std::string& message);
[[noreturn]] void fail_limit(const std::string& message);

class Renderer {
 public:
  Renderer(const nlohmann::ordered_json& context, const Limits& limits);
  // Empties every namespace made during the render: `set ns.me = ns` makes a
  // cycle that reference counting alone would leak.
  ~Renderer();
  void track_namespace(const std::shared_ptr<Dict>& ns) { namespaces_.push_back(ns); }

  std::string run(const StmtList& body);

  // Output. `write` and `check_size` enforce max_output_bytes before growing.
  void write(std::string_view text);
  void check_size(size_t bytes) const;
  void tick() {
    if (++steps_ > limits_.max_steps) fail_limit("the template ran more than max_steps steps");
    if ((steps_ & 1023) == 0) check_time();
  }
  // Renders `body` into a string instead of the output (block set, filter blocks, macros).
  std::string capture(const StmtList& body);
  void exec_body(const StmtList& body);

  // Scopes: a for-loop iteration or a macro call pushes a frame; `set` writes
  // the innermost one, as jinja2's scoping rules do.
  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value value);
  void push_frame();
  void pop_frame();

  Value call(const Value& callee, CallArgs& args);
  // isolated: a macro's body sees only its arguments and the template's top level.
  Value call_macro(const MacroStmt& macro, CallArgs& args, bool isolated = true);
  // The body of a {% call %} block, run from inside the macro it was passed
  // to: it sees the scopes of the call site (frames below `call_site_top`,
  // down to `call_site_floor`), not the macro's.
  Value call_caller(const MacroStmt& body, CallArgs& args, size_t call_site_top, size_t call_site_floor);
  size_t num_frames() const { return num_frames_; }
  size_t floor() const { return floor_; }
  void bind_macro_args(const MacroStmt& macro, CallArgs& args);
  void enter_call();
  void leave_call() { --depth_; }

  const Limits& limits() const { return limits_; }
  // Containers nest at most max_depth deep (kLimit), so printing, comparing
  // and freeing them stays within the stack.
  void check_nesting(int depth) const;
  // One container may hold at most 4 x max_output_bytes (kLimit): copies of
  // strings inside lists are real memory even when nothing is printed.
  void check_bytes(size_t bytes) const;

  enum class Flow { kNormal, kBreak, kContinue };
  Flow flow = Flow::kNormal;

 private:
  void check_time() const;
  using Frame = std::vector<std::pair<std::string, Value>>;

  const Limits& limits_;
  Value context_;
  std::vector<Frame> frames_;
  size_t num_frames_ = 0;
  size_t floor_ = 0;  // the lowest frame a macro body sees besides the template's own
  std::string* out_ = nullptr;
  uint64_t steps_ = 0;
  int depth_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::weak_ptr<Dict>> namespaces_;
  PrintLimitScope print_limit_;
};

// Attribute and item access with Python/jinja2 semantics (render_access.cc).
Value get_attribute(const Value& object, const std::string& name);
Value get_item(const Value& object, const Value& key);
Value slice_value(const Value& object, const Value& start, const Value& stop, const Value& step);
// The items a `for` walks: list items, dict keys, string characters; undefined is empty.
std::vector<Value> iterate(const Value& v);
bool contains(const Value& container, const Value& item);
std::vector<std::string> split_code_points(const std::string& s);

// Built-ins (globals.cc, filters.cc, jinja_tests.cc, string_methods.cc).
Value lookup_global(const std::string& name);
Value apply_filter(Renderer& r, const std::string& name, const Value& input, CallArgs& args);
bool apply_test(Renderer& r, const std::string& name, const Value& input, CallArgs& args);
bool has_test(const std::string& name);
Value string_method(const Value& self, const std::string& name);
Value dict_method(const Value& self, const std::string& name);
Value list_method(const Value& self, const std::string& name);
Value make_undefined(const std::string& hint);
std::string undefined_message(const Value& v);

}  // namespace tokenmill::jinja
