// rejection_error: every engine RejectReason maps to its own HTTP status,
// OpenAI error type, code and (where a field is at fault) param.
#include "server/generation.h"

#include <gtest/gtest.h>

#include <set>

namespace tokenmill::server {
namespace {

engine::FinalEvent rejected(engine::RejectReason reason, std::string message = "why") {
  engine::FinalEvent f;
  f.reason = engine::FinishReason::kRejected;
  f.reject = reason;
  f.error = std::move(message);
  return f;
}

TEST(RejectionError, EachReasonHasItsStatusAndCode) {
  using R = engine::RejectReason;
  struct Case {
    R reason;
    int status;
    const char* type;
    std::optional<std::string> code;
    std::optional<std::string> param;
    int retry_after;
  };
  const Case cases[] = {
      {R::kInvalid, 400, "invalid_request_error", std::nullopt, std::nullopt, 0},
      {R::kPromptTooLong, 400, "invalid_request_error", "context_length_exceeded", "prompt", 0},
      {R::kContextExceeded, 400, "invalid_request_error", "context_length_exceeded", "max_tokens", 0},
      {R::kKvNeverFits, 400, "invalid_request_error", "kv_cache_too_small", "max_tokens", 0},
      {R::kQueueFull, 429, "rate_limit_error", "queue_full", std::nullopt, 1},
      {R::kKvExhausted, 429, "rate_limit_error", "kv_cache_exhausted", std::nullopt, 1},
      {R::kDeadlineExpired, 503, "service_unavailable", "deadline_expired", std::nullopt, 1},
      {R::kShuttingDown, 503, "service_unavailable", "shutting_down", std::nullopt, 5},
      {R::kSloUnattainable, 503, "service_unavailable", "slo_unattainable", std::nullopt, 1},
  };
  std::set<std::string> codes;
  for (const Case& c : cases) {
    const ApiError e = rejection_error(rejected(c.reason, "the detail"));
    SCOPED_TRACE(engine::reject_reason_name(c.reason));
    EXPECT_EQ(e.status(), c.status);
    EXPECT_EQ(e.type(), c.type);
    EXPECT_EQ(e.code(), c.code);
    EXPECT_EQ(e.param(), c.param);
    EXPECT_EQ(e.retry_after_s(), c.retry_after);
    // Transient reasons are exactly the retryable statuses.
    EXPECT_EQ(engine::is_transient(c.reason), c.status != 400);
    if (c.reason != R::kShuttingDown) {
      EXPECT_NE(std::string(e.what()).find("the detail"), std::string::npos) << e.what();
    }
    if (c.code) codes.insert(*c.code);
  }
  EXPECT_EQ(codes.size(), 7u);  // only the two context-length reasons share a code
  EXPECT_EQ(rejection_error(rejected(R::kPromptTooLong), "messages").param(), "messages");
  EXPECT_EQ(failure_error(rejected(R::kQueueFull))->status(), 429);
  // The engine's estimate becomes Retry-After, rounded up to whole seconds.
  engine::FinalEvent slo = rejected(R::kSloUnattainable, "forecast 900 ms, target 500 ms");
  slo.retry_after_s = 2.2;
  EXPECT_EQ(rejection_error(slo).retry_after_s(), 3);
}

}  // namespace
}  // namespace tokenmill::server
