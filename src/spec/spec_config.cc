#include "spec/spec_config.h"

#include "spec/layer_skip.h"
#include "util/error.h"

namespace tokenmill::spec {

SpecMethod parse_spec_method(std::string_view name) {
  if (name == "none") return SpecMethod::kNone;
  if (name == "ngram") return SpecMethod::kNgram;
  if (name == "self") return SpecMethod::kSelf;
  if (name == "draft") return SpecMethod::kDraft;
  fail("unknown speculative decoding method '{}' (choose none, ngram, self or draft)", name);
}

std::string_view spec_method_name(SpecMethod method) {
  switch (method) {
    case SpecMethod::kNone: return "none";
    case SpecMethod::kNgram: return "ngram";
    case SpecMethod::kSelf: return "self";
    case SpecMethod::kDraft: return "draft";
  }
  return "unknown";
}

void SpecConfig::validate() const {
  if (method == SpecMethod::kNone) return;
  ngram.validate();
  if (method == SpecMethod::kSelf) check_skip_layers(skip_layers);
  if (method == SpecMethod::kDraft && draft_model.empty()) fail("--spec draft needs --draft-model FILE");
  if (method != SpecMethod::kDraft && !draft_model.empty())
    fail("--draft-model is only used with --spec draft (got --spec {})", spec_method_name(method));
}

}  // namespace tokenmill::spec
