#include "grammar/matcher.h"

#include <algorithm>

#include "grammar/context_mask.h"
#include "util/error.h"

namespace tokenmill::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), arena_(grammar_->grammar()) {
  arena_.start(state_.tops);
}

bool GrammarMatcher::can_end() const {
  return state_.left == 0 && std::binary_search(state_.tops.begin(), state_.tops.end(), StackArena::kBottom);
}

bool GrammarMatcher::must_end() const { return can_end() && state_.tops.size() == 1; }

void GrammarMatcher::context_key(int32_t top, size_t depth, std::vector<uint32_t>& key) const {
  key.clear();
  int32_t n = top;
  for (; n >= 0 && key.size() < depth; n = arena_.parent(n)) key.push_back(arena_.pos(n));
  key.push_back(n >= 0 ? kKeyCut : kKeyBottom);
}

void GrammarMatcher::add_stack_tokens(int32_t top, std::span<uint32_t> bits) {
  const CompiledGrammar& cg = *grammar_;
  for (size_t depth = kContextDepth;; depth *= 2) {
    context_key(top, depth, key_);
    const ContextMask& cm = cg.context_mask(
        key_, uncached_, [&](ContextMask& out) { compute_context_mask(cg.grammar(), cg.vocab(), key_, out); });
    if (cm.uncertain.size() > kMaxUncertain && key_.back() == kKeyCut) continue;
    for (size_t w = 0; w < bits.size(); ++w) bits[w] |= cm.accepted[w];
    for (int32_t id : cm.uncertain) {
      if (test_bit(bits, id)) continue;
      ParseState s;
      s.tops = {top};
      if (feed_bytes(arena_, s, cg.vocab().bytes(id), scratch_)) set_bit(bits, id);
    }
    return;
  }
}

void GrammarMatcher::fill_mask(std::span<uint32_t> bits) {
  std::fill(bits.begin(), bits.end(), 0u);
  const CompiledGrammar& cg = *grammar_;
  if (ended_) return;
  if (can_end()) {
    for (int32_t id : cg.vocab().eog_ids()) set_bit(bits, id);
  }
  if (state_.left != 0) {
    compute_state_mask(cg.grammar(), cg.vocab(), arena_, state_, bits);
    return;
  }
  for (int32_t top : state_.tops) {
    if (top >= 0) add_stack_tokens(top, bits);
  }
}

bool GrammarMatcher::accept_token(int32_t id) {
  if (ended_) return false;
  const TokenVocab& vocab = grammar_->vocab();
  if (id < 0 || id >= vocab.size()) return false;
  const auto& eog = vocab.eog_ids();
  if (std::find(eog.begin(), eog.end(), id) != eog.end()) {
    if (!can_end()) return false;
    ended_ = true;
    return true;
  }
  const std::string_view bytes = vocab.bytes(id);
  if (bytes.empty()) return false;
  ParseState next = state_;
  if (!feed_bytes(arena_, next, bytes, scratch_)) return false;
  if (next.tops.size() > kMaxStacks) {
    fail("the grammar is too ambiguous: more than {} parse stacks are live at once", kMaxStacks);
  }
  state_ = std::move(next);
  if (arena_.size() > kMaxArenaNodes) compact();
  return true;
}

void GrammarMatcher::compact() {
  StackArena fresh(grammar_->grammar());
  for (int32_t& top : state_.tops) top = copy_stack(arena_, top, fresh);
  sort_unique(state_.tops);
  arena_ = std::move(fresh);
}

}  // namespace tokenmill::grammar
