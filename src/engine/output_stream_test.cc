#include "engine/output_stream.h"

#include <set>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace tokenmill::engine {
namespace {

using std::chrono::milliseconds;

TokenEvent token(int32_t id, std::string text) {
  TokenEvent e;
  e.token = id;
  e.text = std::move(text);
  return e;
}

TEST(OutputStreamTest, EventsArriveInOrderAndEndWithTheFinal) {
  auto stream = std::make_shared<RequestStream>(7, nullptr);
  RequestHandle h(stream);
  EXPECT_EQ(h.id(), 7u);
  EXPECT_FALSE(h.try_next().has_value());
  stream->push_token(token(5, "he"));
  stream->push_token(token(6, "llo"));
  FinalEvent f;
  f.reason = FinishReason::kLength;
  f.text = "!";
  f.usage.completion_tokens = 2;
  stream->push_final(f);
  EXPECT_TRUE(h.done());
  EXPECT_FALSE(h.drained());
  std::optional<StreamEvent> e = h.try_next();
  ASSERT_TRUE(e && e->token);
  EXPECT_EQ(e->token->token, 5);
  GenerationResult r = h.wait();
  EXPECT_EQ(r.tokens, std::vector<int32_t>{6});
  EXPECT_EQ(r.text, "llo!");
  EXPECT_EQ(r.final.reason, FinishReason::kLength);
  EXPECT_TRUE(h.drained());
  // After the final event, next returns at once with nothing.
  EXPECT_FALSE(h.next(milliseconds(100000)).has_value());
}

TEST(OutputStreamTest, NextTimesOutWithoutEvents) {
  RequestHandle h(std::make_shared<RequestStream>(1, nullptr));
  EXPECT_FALSE(h.next(milliseconds(1)).has_value());
  EXPECT_FALSE(h.done());
}

TEST(OutputStreamTest, BlockingNextWakesOnPush) {
  auto stream = std::make_shared<RequestStream>(1, nullptr);
  RequestHandle h(stream);
  std::thread producer([stream] {
    for (int i = 0; i < 100; ++i) stream->push_token(token(i, ""));
    stream->push_final(FinalEvent{});
  });
  GenerationResult r = h.wait();
  producer.join();
  ASSERT_EQ(r.tokens.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(r.tokens[static_cast<size_t>(i)], i);
}

TEST(OutputStreamTest, CancelCallsBackOnceAndNotAfterTheEnd) {
  std::atomic<int> calls{0};
  auto stream = std::make_shared<RequestStream>(3, [&](RequestId id) {
    EXPECT_EQ(id, 3u);
    ++calls;
  });
  RequestHandle h(stream);
  h.cancel();
  h.cancel();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(stream->cancel_requested());

  auto finished = std::make_shared<RequestStream>(4, [&](RequestId) { ++calls; });
  finished->push_final(FinalEvent{});
  RequestHandle(finished).cancel();
  EXPECT_EQ(calls.load(), 1);
}

TEST(OutputStreamTest, ReasonNames) {
  EXPECT_EQ(finish_reason_name(FinishReason::kStop), "stop");
  EXPECT_EQ(finish_reason_name(FinishReason::kTimeout), "timeout");
  EXPECT_EQ(reject_reason_name(RejectReason::kInvalid), "invalid");
  EXPECT_EQ(reject_reason_name(RejectReason::kPromptTooLong), "prompt_too_long");
  EXPECT_EQ(reject_reason_name(RejectReason::kContextExceeded), "context_exceeded");
  EXPECT_EQ(reject_reason_name(RejectReason::kKvNeverFits), "kv_never_fits");
  EXPECT_EQ(reject_reason_name(RejectReason::kQueueFull), "queue_full");
  EXPECT_EQ(reject_reason_name(RejectReason::kKvExhausted), "kv_exhausted");
  EXPECT_EQ(reject_reason_name(RejectReason::kDeadlineExpired), "deadline_expired");
  EXPECT_EQ(reject_reason_name(RejectReason::kShuttingDown), "shutting_down");
  // Every reason has its own label.
  std::set<std::string_view> names;
  for (int i = 0; i < kNumRejectReasons; ++i) names.insert(reject_reason_name(static_cast<RejectReason>(i)));
  EXPECT_EQ(names.size(), static_cast<size_t>(kNumRejectReasons));
  EXPECT_EQ(names.count("unknown"), 0u);
  EXPECT_TRUE(is_transient(RejectReason::kQueueFull));
  EXPECT_FALSE(is_transient(RejectReason::kKvNeverFits));
}

}  // namespace
}  // namespace tokenmill::engine
