// Invariant checks. TM_CHECK is for broken internal invariants only: it aborts
// with file:line and a message. Anything that outside input can get wrong
// (files, requests, flags) throws tokenmill::Error instead (see error.h).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <source_location>

namespace tokenmill {

[[noreturn]] inline void check_failed(const char* expr, const char* msg,
                                      std::source_location loc = std::source_location::current()) {
  std::fprintf(stderr, "%s:%u: CHECK failed: %s%s%s\n", loc.file_name(), loc.line(), expr,
               msg[0] ? " — " : "", msg);
  std::abort();
}

}  // namespace tokenmill

#define TM_CHECK(cond) \
  do {                 \
    if (!(cond)) [[unlikely]] ::tokenmill::check_failed(#cond, ""); \
  } while (0)

#define TM_CHECK_MSG(cond, msg) \
  do {                          \
    if (!(cond)) [[unlikely]] ::tokenmill::check_failed(#cond, msg); \
  } while (0)

#ifdef NDEBUG
#define TM_DCHECK(cond) \
  do {                  \
  } while (0)
#else
#define TM_DCHECK(cond) TM_CHECK(cond)
#endif
