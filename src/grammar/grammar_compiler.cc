#include "grammar/grammar_compiler.h"

#include <nlohmann/json.hpp>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "util/error.h"

namespace tokenmill::grammar {

GrammarCompiler::GrammarCompiler(const tokenizer::Tokenizer& tokenizer, GrammarLimits limits, size_t max_cached)
    : vocab_(TokenVocab::build(tokenizer)), limits_(limits), max_cached_(max_cached) {}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::build(const ConstraintSpec& spec) const {
  if (spec.text.size() > limits_.max_source_bytes) {
    fail("the {} is {} bytes, above the limit of {}", constraint_kind_name(spec.kind), spec.text.size(),
         limits_.max_source_bytes);
  }
  const Deadline deadline(limits_.max_compile_time);
  std::string gbnf;
  switch (spec.kind) {
    case ConstraintKind::kJsonObject:
      gbnf = json_object_gbnf();
      break;
    case ConstraintKind::kJsonSchema: {
      nlohmann::json schema;
      try {
        schema = nlohmann::json::parse(spec.text);
      } catch (const nlohmann::json::exception& e) {
        fail("the JSON Schema is not valid JSON: {}", e.what());
      }
      gbnf = json_schema_to_gbnf(schema, limits_, deadline);
      break;
    }
    case ConstraintKind::kRegex:
      gbnf = regex_to_gbnf(spec.text, limits_, deadline);
      break;
    case ConstraintKind::kGbnf:
      gbnf = spec.text;
      break;
  }
  Grammar grammar = parse_gbnf(gbnf, limits_, deadline);
  return std::make_shared<const CompiledGrammar>(std::move(grammar), vocab_, spec);
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::compile(const ConstraintSpec& spec) {
  std::string key = constraint_kind_name(spec.kind);
  key += '\n';
  key += spec.text;
  {
    std::lock_guard lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.second);
      ++stats_.cache_hits;
      return it->second.first;
    }
  }
  std::shared_ptr<const CompiledGrammar> compiled;
  try {
    compiled = build(spec);  // outside the lock: other requests go on meanwhile
  } catch (const Error&) {
    std::lock_guard lock(mu_);
    ++stats_.failed;
    throw;
  }
  std::lock_guard lock(mu_);
  ++stats_.compiled;
  if (cache_.count(key) == 0) {
    lru_.push_front(key);
    cache_.emplace(std::move(key), std::make_pair(compiled, lru_.begin()));
    while (cache_.size() > max_cached_) {
      cache_.erase(lru_.back());
      lru_.pop_back();
    }
  }
  return compiled;
}

GrammarCompiler::Stats GrammarCompiler::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace tokenmill::grammar
