// SIGINT and SIGTERM for the long-running commands (serve, route, and the
// worker ranks of a parallel serve).
#pragma once

#include <csignal>

namespace tokenmill::cli {

// Blocks SIGINT/SIGTERM in this thread and (inherited) every thread it
// starts, so that the caller's sigwait() (or sigtimedwait()) is the one
// place they arrive, and ignores SIGPIPE: a peer that left must not kill
// the process. Returns the set to wait on.
sigset_t block_stop_signals();

}  // namespace tokenmill::cli
