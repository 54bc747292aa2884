#include "bench/connection_retry.h"

namespace tokenmill::bench {

bool retry_on_fresh_connection(const FailedAttempt& a) {
  const bool stale_socket_failure = a.failure == TransportFailure::kWrite || a.failure == TransportFailure::kRead;
  return stale_socket_failure && a.reused_connection && !a.response_started && !a.at_deadline && a.num_retries == 0;
}

}  // namespace tokenmill::bench
