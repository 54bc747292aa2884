#include "spec/spec_config.h"

#include "spec/layer_skip.h"
#include "util/error.h"

namespace tokenmill::spec {

SpecMethod parse_spec_method(std::string_view name) {
  if (name == "none") return SpecMethod::kNone;
  if (name == "ngram") return SpecMethod::kNgram;
  if (name == "self") return SpecMethod::kSelf;
  fail("unknown speculative decoding method '{}' (choose none, ngram or self)", name);
}

std::string_view spec_method_name(SpecMethod method) {
  switch (method) {
    case SpecMethod::kNone: return "none";
    case SpecMethod::kNgram: return "ngram";
    case SpecMethod::kSelf: return "self";
  }
  return "unknown";
}

void SpecConfig::validate() const {
  if (method == SpecMethod::kNone) return;
  ngram.validate();
  if (method == SpecMethod::kSelf) check_skip_layers(skip_layers);
}

}  // namespace tokenmill::spec
