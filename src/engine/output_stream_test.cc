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
  auto stream = std::make_shared<RequestStream>(7);
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
  RequestHandle h(std::make_shared<RequestStream>(1));
  EXPECT_FALSE(h.next(milliseconds(1)).has_value());
  EXPECT_FALSE(h.done());
}

TEST(OutputStreamTest, BlockingNextWakesOnPush) {
  auto stream = std::make_shared<RequestStream>(1);
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

// What a stream tells the engine, recorded.
struct RecordingControl : RequestControl {
  std::vector<RequestId> cancels;
  std::vector<std::pair<RequestId, bool>> pauses;
  void cancel(RequestId id) override { cancels.push_back(id); }
  void set_paused(RequestId id, bool paused) override { pauses.emplace_back(id, paused); }
};

TEST(OutputStreamTest, CancelCallsBackOnceAndNotAfterTheEnd) {
  auto control = std::make_shared<RecordingControl>();
  auto stream = std::make_shared<RequestStream>(3, control);
  RequestHandle h(stream);
  h.cancel();
  h.cancel();
  EXPECT_EQ(control->cancels, std::vector<RequestId>{3});
  EXPECT_TRUE(stream->cancel_requested());

  auto finished = std::make_shared<RequestStream>(4, control);
  finished->push_final(FinalEvent{});
  RequestHandle(finished).cancel();
  EXPECT_EQ(control->cancels, std::vector<RequestId>{3});
}

TEST(OutputStreamTest, PausesReachTheControlUntilTheEnd) {
  auto control = std::make_shared<RecordingControl>();
  auto stream = std::make_shared<RequestStream>(5, control);
  RequestHandle h(stream);
  h.set_paused(true);
  h.set_paused(false);
  stream->push_final(FinalEvent{});
  h.set_paused(true);  // after the end: nobody to hold
  const std::vector<std::pair<RequestId, bool>> want = {{5, true}, {5, false}};
  EXPECT_EQ(control->pauses, want);
}

TEST(OutputStreamTest, AStreamOutlivesItsControl) {
  auto control = std::make_shared<RecordingControl>();
  auto stream = std::make_shared<RequestStream>(6, control);
  control.reset();  // the engine is gone
  RequestHandle h(stream);
  h.cancel();
  h.set_paused(true);
  EXPECT_TRUE(stream->cancel_requested());
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
