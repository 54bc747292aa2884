#include "bench/connection_retry.h"

#include <gtest/gtest.h>

namespace tokenmill::bench {
namespace {

// The one case that is retried: a stale kept-alive socket found by the
// request's write or by the read of its status line.
FailedAttempt stale_connection(TransportFailure failure) {
  FailedAttempt a;
  a.failure = failure;
  a.reused_connection = true;
  return a;
}

TEST(ConnectionRetry, StaleKeptAliveConnectionIsRetriedOnce) {
  EXPECT_TRUE(retry_on_fresh_connection(stale_connection(TransportFailure::kWrite)));
  EXPECT_TRUE(retry_on_fresh_connection(stale_connection(TransportFailure::kRead)));
  FailedAttempt second = stale_connection(TransportFailure::kRead);
  second.num_retries = 1;
  EXPECT_FALSE(retry_on_fresh_connection(second));
}

TEST(ConnectionRetry, BytesOfTheResponseMakeItARealError) {
  FailedAttempt a = stale_connection(TransportFailure::kRead);
  a.response_started = true;
  EXPECT_FALSE(retry_on_fresh_connection(a));
}

TEST(ConnectionRetry, FreshConnectionTimeoutAndOtherFailuresAreNotRetried) {
  FailedAttempt fresh = stale_connection(TransportFailure::kRead);
  fresh.reused_connection = false;  // a new connection that fails is the server's answer
  EXPECT_FALSE(retry_on_fresh_connection(fresh));
  FailedAttempt slow = stale_connection(TransportFailure::kRead);
  slow.at_deadline = true;  // a read timeout: the server is slow, not gone
  EXPECT_FALSE(retry_on_fresh_connection(slow));
  EXPECT_FALSE(retry_on_fresh_connection(stale_connection(TransportFailure::kOther)));
  EXPECT_FALSE(retry_on_fresh_connection(stale_connection(TransportFailure::kNone)));
}

}  // namespace
}  // namespace tokenmill::bench
