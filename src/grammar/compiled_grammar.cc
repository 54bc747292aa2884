#include "grammar/compiled_grammar.h"

namespace tokenmill::grammar {

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocab> vocab, ConstraintSpec source)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), source_(std::move(source)) {}

size_t CompiledGrammar::KeyHash::operator()(const std::vector<uint32_t>& key) const {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t v : key) h = (h ^ v) * 1099511628211ull;
  return static_cast<size_t>(h);
}

CompiledGrammar::CacheStats CompiledGrammar::cache_stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace tokenmill::grammar
