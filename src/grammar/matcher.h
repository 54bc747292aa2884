// Token-level matching of one generation against a CompiledGrammar.
//
// State: the set of live parse stacks (positions into Grammar::symbols,
// innermost last, the top always a character class) plus the bytes of an
// unfinished UTF-8 character. accept_token() feeds a token's bytes.
//
// Masks: for each stack, its top kContextDepth positions form a context key;
// the tokens that context accepts without looking deeper, and those that run
// past it ("uncertain"), are cached in the CompiledGrammar. fill_mask() ORs
// the cached accepted sets of every live context and checks only the
// uncertain tokens against the full state. Inside a JSON string nearly
// every token is accepted by the context alone, so a step costs a bitmask
// OR plus the few hundred tokens that contain a quote.
//
// Thread-safety: one matcher per sequence, engine thread only. Copyable
// (a speculative verifier or a forked sample takes a copy).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/parse_state.h"
#include "grammar/stack_arena.h"

namespace tokenmill::grammar {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Sets bit (id % 32) of bits[id / 32] for every token allowed next, the
  // end-of-generation ids included when the grammar can end here; clears
  // the rest. bits: [vocab.mask_words()].
  void fill_mask(std::span<uint32_t> bits);

  // Feeds the token. Returns false (state unchanged) when the grammar does
  // not allow it. An end-of-generation id is accepted when can_end().
  bool accept_token(int32_t id);

  // True when the text so far is a complete sentence of the grammar.
  bool can_end() const;
  // True when the text is complete and nothing may follow it (only an
  // end-of-generation token is allowed).
  bool must_end() const;

  const CompiledGrammar& compiled() const { return *grammar_; }

  // Live parse stacks beyond this fail the request instead of growing
  // without bound on a pathologically ambiguous grammar.
  static constexpr size_t kMaxStacks = 4096;
  // A context key starts this deep; a context that leaves more than
  // kMaxUncertain tokens undecided is looked up again twice as deep.
  static constexpr size_t kContextDepth = 3;
  static constexpr size_t kMaxUncertain = 512;

 private:
  // The key of `top`'s context at `depth`: sets *cut when the stack goes on.
  void context_key(int32_t top, size_t depth, std::vector<uint32_t>& key) const;
  // ORs into bits the tokens allowed from the one stack `top`.
  void add_stack_tokens(int32_t top, std::span<uint32_t> bits);
  // Re-interns the live stacks into a fresh arena once the old one has
  // grown past kMaxArenaNodes (it only grows as tokens are fed).
  void compact();
  static constexpr size_t kMaxArenaNodes = 1 << 20;

  std::shared_ptr<const CompiledGrammar> grammar_;
  StackArena arena_;
  ParseState state_;
  bool ended_ = false;  // an end-of-generation id was accepted
  std::vector<int32_t> scratch_;
  std::vector<uint32_t> key_;
  ContextMask uncached_;
};

}  // namespace tokenmill::grammar
