#include "spec/spec_config.h"

#include "util/error.h"

namespace tokenmill::spec {

SpecMethod parse_spec_method(std::string_view name) {
  if (name == "none") return SpecMethod::kNone;
  if (name == "ngram") return SpecMethod::kNgram;
  fail("unknown speculative decoding method '{}' (choose none or ngram)", name);
}

std::string_view spec_method_name(SpecMethod method) {
  switch (method) {
    case SpecMethod::kNone: return "none";
    case SpecMethod::kNgram: return "ngram";
  }
  return "unknown";
}

void SpecConfig::validate() const {
  if (method == SpecMethod::kNgram) ngram.validate();
}

}  // namespace tokenmill::spec
