// Invariant checks. TM_CHECK is for broken internal invariants only: it aborts
// with file:line and a message. Anything that outside input can get wrong
// (files, requests, flags) throws tokenmill::Error instead (see error.h).
#pragma once

#include <cstdio>
#include <cstdlib>

namespace tokenmill {

// The call site is captured with the builtins rather than std::source_location,
// which clang 14 cannot use with libstdc++ 12 (the fuzz build).
[[noreturn]] inline void check_failed(const char* expr, const char* msg, const char* file = __builtin_FILE(),
                                      unsigned line = __builtin_LINE()) {
  std::fprintf(stderr, "%s:%u: CHECK failed: %s%s%s\n", file, line, expr, msg[0] ? " — " : "", msg);
  std::abort();
}

}  // namespace tokenmill

#define TM_CHECK(cond)                      \
  do {                                      \
    if (!(cond)) [[unlikely]]               \
      ::tokenmill::check_failed(#cond, ""); \
  } while (0)

#define TM_CHECK_MSG(cond, msg)              \
  do {                                       \
    if (!(cond)) [[unlikely]]                \
      ::tokenmill::check_failed(#cond, msg); \
  } while (0)

#ifdef NDEBUG
#define TM_DCHECK(cond) \
  do {                  \
  } while (0)
#else
#define TM_DCHECK(cond) TM_CHECK(cond)
#endif
