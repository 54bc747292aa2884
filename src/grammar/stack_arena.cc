#include "grammar/stack_arena.h"

#include <algorithm>

namespace tokenmill::grammar {

void sort_unique(std::vector<int32_t>& tops) {
  std::sort(tops.begin(), tops.end());
  tops.erase(std::unique(tops.begin(), tops.end()), tops.end());
}

int32_t copy_stack(const StackArena& from, int32_t top, StackArena& to) {
  std::vector<uint32_t> chain;
  int32_t n = top;
  for (; n >= 0; n = from.parent(n)) chain.push_back(from.pos(n));
  int32_t copy = n;  // kBottom or kBoundary
  for (size_t i = chain.size(); i-- > 0;) copy = to.push(copy, chain[i]);
  return copy;
}

int32_t StackArena::push(int32_t parent, uint32_t pos) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(parent + 2)) << 32) | pos;
  auto [it, inserted] = interned_.emplace(key, static_cast<int32_t>(nodes_.size()));
  if (inserted) {
    nodes_.push_back(Node{pos, parent});
    seen_.push_back(0);
  }
  return it->second;
}

void StackArena::clear() {
  nodes_.clear();
  interned_.clear();
  seen_.clear();
  epoch_ = 0;
}

void StackArena::start(std::vector<int32_t>& out) {
  out.clear();
  for (uint32_t alt : g_->rule_alts[g_->root]) expand(push(kBottom, alt), out);
  sort_unique(out);
}

// A worklist rather than recursion: schema grammars nest deeply. Each node
// is handled once per call (its expansion depends only on the node), which
// also keeps nullable chains from multiplying the work.
void StackArena::expand(int32_t node, std::vector<int32_t>& out) {
  if (++epoch_ == 0) {
    std::fill(seen_.begin(), seen_.end(), 0);
    epoch_ = 1;
  }
  work_.clear();
  work_.push_back(node);
  while (!work_.empty()) {
    const int32_t n = work_.back();
    work_.pop_back();
    if (n < 0) {  // kBottom or kBoundary: nothing left to expand
      out.push_back(n);
      continue;
    }
    if (seen_[static_cast<size_t>(n)] == epoch_) continue;
    seen_[static_cast<size_t>(n)] = epoch_;
    const uint32_t p = nodes_[static_cast<size_t>(n)].pos;
    const int32_t parent = nodes_[static_cast<size_t>(n)].parent;
    const Symbol sym = g_->symbols[p];
    if (sym.kind == SymbolKind::kClass) {
      out.push_back(n);
    } else if (sym.kind == SymbolKind::kEnd) {
      work_.push_back(parent);
    } else {
      // Tail position: nothing follows the reference in this alternative,
      // so the rule returns straight to our parent (no stack growth for
      // right recursion such as x* -> x S).
      const int32_t cont = g_->symbols[p + 1].kind == SymbolKind::kEnd ? parent : push(parent, p + 1);
      for (uint32_t alt : g_->rule_alts[sym.index]) work_.push_back(push(cont, alt));
    }
  }
}

void StackArena::advance(std::span<const int32_t> tops, uint32_t cp, std::vector<int32_t>& out) {
  out.clear();
  for (int32_t top : tops) {
    if (top < 0 || !top_accepts(top, cp)) continue;
    const Node n = nodes_[static_cast<size_t>(top)];
    expand(push(n.parent, n.pos + 1), out);
  }
  sort_unique(out);
}

}  // namespace tokenmill::grammar
