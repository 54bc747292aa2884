#include "router/sse_framer.h"

#include <gtest/gtest.h>

namespace tokenmill::router {
namespace {

TEST(SseFramer, WholeEventsPassAtOnce) {
  SseFramer f;
  EXPECT_EQ(f.feed("data: {\"a\":1}\n\n"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(f.feed(": keep-alive\n\n"), ": keep-alive\n\n");
  EXPECT_EQ(f.pending(), 0u);
  EXPECT_FALSE(f.saw_done());
  EXPECT_EQ(f.feed("data: [DONE]\n\n"), "data: [DONE]\n\n");
  EXPECT_TRUE(f.saw_done());
}

TEST(SseFramer, SplitEventWaitsForItsEnd) {
  SseFramer f;
  EXPECT_EQ(f.feed("data: {\"a\":1}\n\ndata: {\"b\""), "data: {\"a\":1}\n\n");
  EXPECT_EQ(f.pending(), 10u);
  EXPECT_EQ(f.feed(":2}\n"), "");
  EXPECT_EQ(f.feed("\n"), "data: {\"b\":2}\n\n");
  EXPECT_EQ(f.pending(), 0u);
}

TEST(SseFramer, CrLfBoundaries) {
  SseFramer f;
  EXPECT_EQ(f.feed("data: x\r\n\r\ndata: y"), "data: x\r\n\r\n");
  EXPECT_EQ(f.feed("\r\n\r\n"), "data: y\r\n\r\n");
}

}  // namespace
}  // namespace tokenmill::router
