// Graph-structured parse stacks for a Grammar (GLR style). A stack is the
// index of its top node; a node is (position in Grammar::symbols, parent
// node), hash-consed, so equal stacks are equal ints, a set of stacks is a
// sorted vector of ints, and pushing or popping never copies a stack.
//
// A node's position is the next thing to match in its alternative. A stack
// is "expanded" when its top position is a character class; expand() turns
// a node into the expanded stacks it stands for (kEnd pops to the parent,
// a rule reference descends into every alternative of the rule).
//
// Two special tops: kBottom, the empty stack (the sentence may end here),
// and kBoundary, the cut of a context key (matcher.h): what lies below it is
// not known.
//
// Thread-safety: none; one arena per matcher or per mask computation.
// Memory: 16 bytes per node plus the intern table; grows until clear().
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace tokenmill::grammar {

class StackArena {
 public:
  static constexpr int32_t kBottom = -1;
  static constexpr int32_t kBoundary = -2;

  explicit StackArena(const Grammar& grammar) : g_(&grammar) {}

  const Grammar& grammar() const { return *g_; }
  int32_t push(int32_t parent, uint32_t pos);
  uint32_t pos(int32_t node) const { return nodes_[static_cast<size_t>(node)].pos; }
  int32_t parent(int32_t node) const { return nodes_[static_cast<size_t>(node)].parent; }
  size_t size() const { return nodes_.size(); }
  void clear();

  // The expanded stacks of the start rule, sorted and unique.
  void start(std::vector<int32_t>& out);
  // Appends the expanded stacks `node` stands for (unsorted, may repeat).
  void expand(int32_t node, std::vector<int32_t>& out);
  // The expanded stacks after consuming code point cp from each of `tops`
  // whose class holds it (kBottom and kBoundary consume nothing), sorted
  // and unique.
  void advance(std::span<const int32_t> tops, uint32_t cp, std::vector<int32_t>& out);
  // True when a class on top of the stack holds cp (precondition: top >= 0).
  // True when the class on top of the stack holds some code point in
  // [lo, hi] (an unfinished UTF-8 character can still become one it takes).
  bool top_accepts_any(int32_t top, uint32_t lo, uint32_t hi) const {
    return g_->classes[g_->symbols[pos(top)].index].intersects(lo, hi);
  }
  bool top_accepts(int32_t top, uint32_t cp) const { return g_->classes[g_->symbols[pos(top)].index].contains(cp); }

 private:
  struct Node {
    uint32_t pos;
    int32_t parent;
  };
  const Grammar* g_;  // a pointer so that arenas can be copied with their matcher
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> interned_;
  std::vector<uint32_t> seen_;  // [nodes] epoch of the last expand() that visited the node
  uint32_t epoch_ = 0;
  std::vector<int32_t> work_;
};

// The same stack interned in another arena (of the same grammar). O(depth).
int32_t copy_stack(const StackArena& from, int32_t top, StackArena& to);

// Sorts and removes duplicates.
void sort_unique(std::vector<int32_t>& tops);

}  // namespace tokenmill::grammar
