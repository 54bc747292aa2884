#include "grammar/context_mask.h"

#include <algorithm>
#include <unordered_map>

namespace tokenmill::grammar {
namespace {

struct StateHash {
  size_t operator()(const ParseState& s) const {
    uint64_t h = (static_cast<uint64_t>(s.cp) << 16) ^ (static_cast<uint64_t>(s.left) << 8) ^ s.length;
    for (int32_t t : s.tops) h = (h ^ static_cast<uint32_t>(t)) * 0x100000001b3ull;
    return h;
  }
};

// One trie walk. Parse states are copied into a private arena first (a
// context key builds its own), so interning never touches a matcher.
class TrieWalker {
 public:
  TrieWalker(const Grammar& grammar, const TokenVocab& vocab) : arena_(grammar), vocab_(vocab) {}
  StackArena& arena() { return arena_; }

  // Walks every trie node reachable from `start`; accepted and uncertain
  // are [mask_words] bitsets.
  void walk(const ParseState& start, std::span<uint32_t> accepted, std::vector<uint32_t>& uncertain);

 private:
  int32_t intern(ParseState state);
  int32_t next(int32_t state, uint8_t byte);
  void mark(std::span<uint32_t> bits, uint32_t node) const;
  void mark_subtree(std::vector<uint32_t>& bits, uint32_t node) const;

  StackArena arena_;
  const TokenVocab& vocab_;
  std::vector<ParseState> states_;
  std::vector<bool> has_cut_;
  std::unordered_map<ParseState, int32_t, StateHash> ids_;
  std::unordered_map<uint64_t, int32_t> transitions_;
  std::vector<int32_t> scratch_;
};

int32_t TrieWalker::intern(ParseState state) {
  auto it = ids_.find(state);
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<int32_t>(states_.size());
  has_cut_.push_back(std::binary_search(state.tops.begin(), state.tops.end(), StackArena::kBoundary));
  states_.push_back(state);
  ids_.emplace(std::move(state), id);
  return id;
}

int32_t TrieWalker::next(int32_t state, uint8_t byte) {
  const uint64_t key = (static_cast<uint64_t>(state) << 8) | byte;
  auto it = transitions_.find(key);
  if (it != transitions_.end()) return it->second;
  ParseState s = states_[static_cast<size_t>(state)];
  const int32_t to = feed_byte(arena_, s, byte, scratch_) ? intern(std::move(s)) : -1;
  transitions_.emplace(key, to);
  return to;
}

void TrieWalker::mark(std::span<uint32_t> bits, uint32_t node) const {
  const TokenVocab::Node& n = vocab_.nodes()[node];
  if (n.token < 0) return;
  set_bit(bits, n.token);
  const auto& dups = vocab_.duplicates();
  auto it = std::lower_bound(dups.begin(), dups.end(), std::make_pair(node, int32_t{-1}));
  for (; it != dups.end() && it->first == node; ++it) set_bit(bits, it->second);
}

void TrieWalker::mark_subtree(std::vector<uint32_t>& bits, uint32_t node) const {
  for (uint32_t n = node + 1; n < vocab_.nodes()[node].subtree_end; ++n) mark(bits, n);
}

// Depth-first over the trie with (node, state) pairs: a node is visited
// with the state after its bytes; dead states prune their subtree.
void TrieWalker::walk(const ParseState& start, std::span<uint32_t> accepted, std::vector<uint32_t>& uncertain) {
  const auto& nodes = vocab_.nodes();
  std::vector<std::pair<uint32_t, int32_t>> todo = {{0u, intern(start)}};
  while (!todo.empty()) {
    const auto [node, state] = todo.back();
    todo.pop_back();
    // A live state is a valid prefix (feed_byte checks that an unfinished
    // character can still be completed), so the token ending here is allowed.
    if (node != 0) mark(accepted, node);
    // Some stack ended at the cut: the enclosing context decides every
    // longer token.
    if (has_cut_[static_cast<size_t>(state)]) mark_subtree(uncertain, node);
    for (uint32_t child = node + 1; child < nodes[node].subtree_end; child = nodes[child].subtree_end) {
      const int32_t to = next(state, nodes[child].byte);
      if (to >= 0) todo.emplace_back(child, to);
    }
  }
}

}  // namespace

void compute_context_mask(const Grammar& grammar, const TokenVocab& vocab, std::span<const uint32_t> key,
                          ContextMask& out) {
  TrieWalker walker(grammar, vocab);
  StackArena& arena = walker.arena();
  int32_t node = key.back() == kKeyCut ? StackArena::kBoundary : StackArena::kBottom;
  for (size_t i = key.size() - 1; i-- > 0;) node = arena.push(node, key[i]);
  ParseState start;
  start.tops = {node};
  out.accepted.assign(vocab.mask_words(), 0);
  std::vector<uint32_t> uncertain(vocab.mask_words(), 0);
  walker.walk(start, out.accepted, uncertain);
  out.uncertain.clear();
  for (size_t w = 0; w < uncertain.size(); ++w) {
    uint32_t bits = uncertain[w] & ~out.accepted[w];
    while (bits != 0) {
      out.uncertain.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(bits))));
      bits &= bits - 1;
    }
  }
}

void compute_state_mask(const Grammar& grammar, const TokenVocab& vocab, const StackArena& arena,
                        const ParseState& state, std::span<uint32_t> bits) {
  TrieWalker walker(grammar, vocab);
  ParseState start = state;
  for (int32_t& top : start.tops) top = copy_stack(arena, top, walker.arena());
  sort_unique(start.tops);
  std::vector<uint32_t> unused(vocab.mask_words(), 0);
  walker.walk(start, bits, unused);
}

}  // namespace tokenmill::grammar
