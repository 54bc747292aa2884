// Speculative decoding settings of an engine (EngineConfig::spec): which
// proposer drafts tokens for decoding sequences, and how many.
#pragma once

#include <string_view>

#include <string>

#include "spec/ngram_proposer.h"

namespace tokenmill::spec {

enum class SpecMethod {
  kNone,   // plain decoding
  kNgram,  // prompt lookup (ngram_proposer.h)
  kSelf,   // the target with layers skipped (layer_skip.h)
  kDraft,  // a second, smaller model with the same vocabulary (draft_model.h)
};

// "none", "ngram", "self", "draft"; throws Error naming the valid choices otherwise.
SpecMethod parse_spec_method(std::string_view name);
std::string_view spec_method_name(SpecMethod method);

struct SpecConfig {
  SpecMethod method = SpecMethod::kNone;
  NgramConfig ngram;                // max_draft is k for every method
  std::string skip_layers = "0.5";  // kSelf: which layers the draft leaves out
  std::string draft_model;          // kDraft: the draft GGUF's path
  // Adaptive k (cost_model.h): each step, each sequence drafts as many
  // tokens as its running acceptance rate and the measured step costs say
  // pay, up to k; none once the batch makes the target compute-bound.
  // False: always k (what fits).
  bool adaptive = true;

  bool enabled() const { return method != SpecMethod::kNone; }
  // Throws Error naming the bad field (only the chosen method's are checked).
  void validate() const;
};

}  // namespace tokenmill::spec
