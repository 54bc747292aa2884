#include "grammar/grammar_compiler.h"

#include <nlohmann/json.hpp>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "util/bounded_json.h"
#include "util/error.h"

namespace tokenmill::grammar {

std::string constraint_to_gbnf(const ConstraintSpec& spec, const GrammarLimits& limits, const Deadline& deadline) {
  if (spec.text.size() > limits.max_source_bytes) {
    fail("the {} is {} bytes, above the limit of {}", constraint_kind_name(spec.kind), spec.text.size(),
         limits.max_source_bytes);
  }
  switch (spec.kind) {
    case ConstraintKind::kJsonObject: return json_object_gbnf();
    case ConstraintKind::kJsonSchema: {
      // ordered_json keeps the schema's property order, which the grammar
      // follows (a model writes the fields in the order it was shown).
      nlohmann::ordered_json schema;
      try {
        schema = util::parse_bounded<nlohmann::ordered_json>(spec.text, util::JsonLimits{});
      } catch (const util::JsonLimitError& e) {
        fail("the JSON Schema {}: {}", e.why() == util::JsonRefusal::kSyntax ? "is not valid JSON" : "is too large",
             e.what());
      }
      return json_schema_to_gbnf(schema, limits, deadline);
    }
    case ConstraintKind::kRegex: return regex_to_gbnf(spec.text, limits, deadline);
    case ConstraintKind::kGbnf: break;
  }
  return spec.text;
}

GrammarCompiler::GrammarCompiler(const tokenizer::Tokenizer& tokenizer, GrammarLimits limits, size_t max_cached)
    : vocab_(TokenVocab::build(tokenizer)), limits_(limits), max_cached_(max_cached) {}

std::string GrammarCompiler::to_gbnf(const ConstraintSpec& spec) const {
  return constraint_to_gbnf(spec, limits_, Deadline(limits_.max_compile_time));
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::build(const ConstraintSpec& spec) const {
  const Deadline deadline(limits_.max_compile_time);
  Grammar grammar = parse_gbnf(constraint_to_gbnf(spec, limits_, deadline), limits_, deadline);
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
