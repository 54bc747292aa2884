#include "grammar/constraint.h"

namespace tokenmill::grammar {

const char* constraint_kind_name(ConstraintKind kind) {
  switch (kind) {
    case ConstraintKind::kJsonObject: return "json_object";
    case ConstraintKind::kJsonSchema: return "json_schema";
    case ConstraintKind::kRegex: return "regex";
    case ConstraintKind::kGbnf: return "grammar";
  }
  return "?";
}

}  // namespace tokenmill::grammar
