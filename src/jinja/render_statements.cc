// Statement nodes: output, control flow, assignments, macros and loops.
#include <fmt/format.h>

#include <algorithm>

#include "jinja/render.h"

namespace tokenmill::jinja {
namespace {

void bind_targets(Renderer& r, const std::vector<std::string>& targets, const Value& item) {
  if (targets.size() == 1) {
    r.assign(targets[0], item);
    return;
  }
  std::vector<Value> parts = iterate(item);
  if (!item.is_list() && !item.is_string())
    fail_render(fmt::format("cannot unpack non-iterable {} object", item.type_name()));
  if (parts.size() != targets.size()) {
    fail_render(fmt::format("expected {} values to unpack, got {}", targets.size(), parts.size()));
  }
  for (size_t n = 0; n < targets.size(); ++n) r.assign(targets[n], std::move(parts[n]));
}

// The loop object of one for statement; its fields are updated in place each iteration.
enum LoopField {
  kIndex,
  kIndex0,
  kRevindex,
  kRevindex0,
  kFirst,
  kLast,
  kLength,
  kPrevitem,
  kNextitem,
  kDepth,
  kDepth0,
  kCycle
};

Value make_loop_object(size_t length) {
  Value loop = Value::new_dict();
  auto& e = loop.dict->entries;
  for (const char* name : {"index", "index0", "revindex", "revindex0", "first", "last", "length", "previtem",
                           "nextitem", "depth", "depth0", "cycle"}) {
    e.emplace_back(Value::string(name), Value::undefined());
  }
  e[kLength].second = Value::integer(static_cast<int64_t>(length));
  e[kDepth].second = Value::integer(1);
  e[kDepth0].second = Value::integer(0);
  return loop;
}

void update_loop_object(Value& loop, const std::vector<Value>& items, size_t n) {
  auto& e = loop.dict->entries;
  const auto i = static_cast<int64_t>(n);
  const auto len = static_cast<int64_t>(items.size());
  e[kIndex].second = Value::integer(i + 1);
  e[kIndex0].second = Value::integer(i);
  e[kRevindex].second = Value::integer(len - i);
  e[kRevindex0].second = Value::integer(len - i - 1);
  e[kFirst].second = Value::boolean(n == 0);
  e[kLast].second = Value::boolean(i == len - 1);
  e[kPrevitem].second = n > 0 ? items[n - 1] : make_undefined("there is no previous item");
  e[kNextitem].second = i + 1 < len ? items[n + 1] : make_undefined("there is no next item");
  e[kCycle].second = Value::function("loop.cycle", [i](Renderer&, CallArgs& args) {
    if (args.positional.empty()) fail_render("no items for cycling given");
    return args.positional[static_cast<size_t>(i) % args.positional.size()];
  });
}

}  // namespace

void TextStmt::exec(Renderer& r) const { r.write(text); }

void PrintStmt::exec(Renderer& r) const {
  Value v = value->eval(r);
  if (v.is_string()) {
    r.write(v.s);
  } else if (!v.is_undefined()) {
    r.write(to_str(v));
  }
}

void BlockStmt::exec(Renderer& r) const { r.exec_body(body); }

void IfStmt::exec(Renderer& r) const {
  for (const auto& [cond, body] : branches) {
    if (cond->eval(r).truthy()) {
      r.exec_body(body);
      return;
    }
  }
  r.exec_body(else_body);
}

void ForStmt::exec(Renderer& r) const {
  Value source = iterable->eval(r);
  if (!source.is_list() && !source.is_dict() && !source.is_string() && !source.is_undefined()) {
    fail_render(fmt::format("'{}' object is not iterable", source.type_name()));
  }
  std::vector<Value> items = iterate(source);
  if (filter) {
    std::vector<Value> kept;
    for (Value& item : items) {
      r.tick();
      r.push_frame();
      bind_targets(r, targets, item);
      const bool keep = filter->eval(r).truthy();
      r.pop_frame();
      if (keep) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    r.exec_body(else_body);
    return;
  }
  Value loop = make_loop_object(items.size());
  for (size_t n = 0; n < items.size(); ++n) {
    r.tick();
    r.push_frame();
    update_loop_object(loop, items, n);
    r.assign("loop", loop);
    try {
      bind_targets(r, targets, items[n]);
      r.exec_body(body);
    } catch (...) {
      r.pop_frame();
      throw;
    }
    r.pop_frame();
    const Renderer::Flow flow = r.flow;
    r.flow = Renderer::Flow::kNormal;
    if (flow == Renderer::Flow::kBreak) break;
  }
}

void SetStmt::exec(Renderer& r) const {
  Value v;
  if (value) {
    v = value->eval(r);
  } else {
    v = Value::string(r.capture(body));
    for (const auto& f : filters) v = f->apply(r, std::move(v));
  }
  if (!attribute.empty()) {
    Value ns = r.lookup(targets[0]);
    if (!ns.is_dict() || !ns.dict->is_namespace) fail_render("can only assign attributes of a namespace object");
    ns.dict->depth = std::max(ns.dict->depth, v.depth() + 1);
    r.check_nesting(ns.dict->depth);
    r.check_bytes(ns.dict->bytes);
    ns.dict->set(Value::string(attribute), std::move(v));
    return;
  }
  bind_targets(r, targets, v);
}

void MacroStmt::exec(Renderer& r) const {
  const MacroStmt* self = this;
  r.assign(name, Value::function(name, [self](Renderer& rr, CallArgs& args) { return rr.call_macro(*self, args); }));
}

void CallBlockStmt::exec(Renderer& r) const {
  const MacroStmt* body = caller.get();
  const size_t top = r.num_frames(), floor = r.floor();
  Value fn = call->callee->eval(r);
  CallArgs args;
  for (const ExprPtr& e : call->args.positional) args.positional.push_back(e->eval(r));
  for (const auto& [name, e] : call->args.keywords) args.keywords.emplace_back(name, e->eval(r));
  args.keywords.emplace_back("caller", Value::function("caller", [body, top, floor](Renderer& rr, CallArgs& a) {
                               return rr.call_caller(*body, a, top, floor);
                             }));
  Value out = r.call(fn, args);
  r.write(to_str(out));
}

void FilterBlockStmt::exec(Renderer& r) const {
  Value v = Value::string(r.capture(body));
  for (const auto& f : filters) v = f->apply(r, std::move(v));
  r.write(to_str(v));
}

void LoopControlStmt::exec(Renderer& r) const {
  r.flow = is_break ? Renderer::Flow::kBreak : Renderer::Flow::kContinue;
}

}  // namespace tokenmill::jinja
