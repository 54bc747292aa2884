#include "grammar/grammar_limits.h"

#include "util/error.h"

namespace tokenmill::grammar {

void Deadline::check(const char* stage) const {
  if (SteadyClock::now() > end_) {
    fail("grammar compilation took longer than {} ms ({}); simplify the constraint", budget_.count(), stage);
  }
}

}  // namespace tokenmill::grammar
