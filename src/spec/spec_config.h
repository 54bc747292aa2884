// Speculative decoding settings of an engine (EngineConfig::spec): which
// proposer drafts tokens for decoding sequences, and how many.
#pragma once

#include <string_view>

#include "spec/ngram_proposer.h"

namespace tokenmill::spec {

enum class SpecMethod {
  kNone,   // plain decoding
  kNgram,  // prompt lookup (ngram_proposer.h)
};

// "none", "ngram"; throws Error naming the valid choices otherwise.
SpecMethod parse_spec_method(std::string_view name);
std::string_view spec_method_name(SpecMethod method);

struct SpecConfig {
  SpecMethod method = SpecMethod::kNone;
  NgramConfig ngram;  // max_draft is k for every method

  bool enabled() const { return method != SpecMethod::kNone; }
  // Throws Error naming the bad field (only the chosen method's are checked).
  void validate() const;
};

}  // namespace tokenmill::spec
