// Compiles constraints against one model's vocabulary and caches the
// results by (constraint kind, text hash); the compiler belongs to one
// tokenizer, so the tokenizer identity is part of every key.
//
// Thread-safety: compile() may be called from many threads at once (the
// HTTP handlers); it runs in the caller's thread, never on the engine
// thread, with the time and size bounds of GrammarLimits. Two threads
// compiling the same text may both do the work; one result is kept.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/compiled_grammar.h"
#include "grammar/constraint.h"
#include "grammar/grammar_limits.h"
#include "grammar/token_vocab.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill::grammar {

// The GBNF text of a constraint (schemas and regexes converted; a grammar
// as given). Throws tokenmill::Error as GrammarCompiler::compile.
std::string constraint_to_gbnf(const ConstraintSpec& spec, const GrammarLimits& limits, const Deadline& deadline);

class GrammarCompiler {
 public:
  // Builds the vocabulary tables (token bytes, byte trie) once: O(total
  // token bytes). The tokenizer must outlive the compiler.
  GrammarCompiler(const tokenizer::Tokenizer& tokenizer, GrammarLimits limits, size_t max_cached = 64);

  // Throws tokenmill::Error naming the unsupported feature, the syntax
  // error or the exceeded limit (the server answers 400 with it).
  std::shared_ptr<const CompiledGrammar> compile(const ConstraintSpec& spec);

  // The same without the cache (for measuring compile time).
  std::shared_ptr<const CompiledGrammar> compile_uncached(const ConstraintSpec& spec) const { return build(spec); }
  // The GBNF text a constraint becomes (schema and regex conversions).
  std::string to_gbnf(const ConstraintSpec& spec) const;

  const GrammarLimits& limits() const { return limits_; }
  std::shared_ptr<const TokenVocab> vocab() const { return vocab_; }

  struct Stats {
    int64_t compiled = 0;    // cache misses that compiled
    int64_t cache_hits = 0;  // served from the cache
    int64_t failed = 0;      // refused constraints
  };
  Stats stats() const;

 private:
  std::shared_ptr<const CompiledGrammar> build(const ConstraintSpec& spec) const;

  std::shared_ptr<const TokenVocab> vocab_;
  GrammarLimits limits_;
  size_t max_cached_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;  // keys, most recent first
  std::unordered_map<std::string, std::pair<std::shared_ptr<const CompiledGrammar>, std::list<std::string>::iterator>>
      cache_;
  Stats stats_;
};

}  // namespace tokenmill::grammar
