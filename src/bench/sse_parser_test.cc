#include "bench/sse_parser.h"

#include <gtest/gtest.h>

#include "bench/response_parser.h"

namespace tokenmill::bench {
namespace {

std::vector<std::string> parse_in_pieces(const std::string& stream, size_t piece) {
  SseParser p;
  std::vector<std::string> events;
  auto on = [&](const std::string& d) { events.push_back(d); };
  for (size_t i = 0; i < stream.size(); i += piece) p.feed(std::string_view(stream).substr(i, piece), on);
  p.finish(on);
  return events;
}

TEST(SseParser, EventsSurviveAnySplit) {
  const std::string stream =
      ": keep-alive comment\r\n"
      "data: {\"a\":1}\r\n\r\n"
      "event: message\n"
      "data: first line\n"
      "data:second line\n\n"
      "id: 7\r"
      "data: cr only\r\r"
      "data: [DONE]\n\n";
  const std::vector<std::string> want = {"{\"a\":1}", "first line\nsecond line", "cr only", "[DONE]"};
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    EXPECT_EQ(parse_in_pieces(stream, piece), want) << "piece size " << piece;
  }
}

TEST(SseParser, UnterminatedLastEventIsDispatchedAtFinish) {
  EXPECT_EQ(parse_in_pieces("data: x\n\ndata: tail", 3), (std::vector<std::string>{"x", "tail"}));
  EXPECT_EQ(parse_in_pieces("data\n\n", 2), (std::vector<std::string>{""}));  // a bare field name: empty data
  EXPECT_TRUE(parse_in_pieces("\n\n: only a comment\n\n", 1).empty());
}

TEST(ResponseParser, CompletionChatUsageAndTimings) {
  const ResponsePiece c = parse_response_piece(R"({"choices":[{"index":0,"text":"Hello","finish_reason":null}]})");
  EXPECT_EQ(c.text_bytes, 5);
  EXPECT_TRUE(c.finish_reason.empty());
  const ResponsePiece d = parse_response_piece(R"({"choices":[{"delta":{"content":"ab"},"finish_reason":"length"}]})");
  EXPECT_EQ(d.text_bytes, 2);
  EXPECT_EQ(d.finish_reason, "length");
  const ResponsePiece u = parse_response_piece(
      R"({"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":64,
                              "prompt_tokens_details":{"cached_tokens":96}},
          "timings":{"queue_ms":12.5,"prompt_ms":80,"ttft_ms":95}})");
  EXPECT_EQ(u.prompt_tokens, 120);
  EXPECT_EQ(u.completion_tokens, 64);
  EXPECT_EQ(u.cached_tokens, 96);
  EXPECT_DOUBLE_EQ(u.queue_ms, 12.5);
  EXPECT_DOUBLE_EQ(u.server_ttft_ms, 95);
  // llama.cpp: prompt_n is only what it computed; cache_n what it reused.
  const ResponsePiece l = parse_response_piece(R"({"choices":[{"text":""}],"timings":{"prompt_n":30,"cache_n":70}})");
  EXPECT_EQ(l.cached_tokens, 70);
  EXPECT_EQ(l.prompt_tokens, 100);
  EXPECT_EQ(l.text_bytes, 0);
  EXPECT_EQ(l.draft_tokens, -1);
  // Speculative decoding tallies: tokenmill's names, and llama.cpp's.
  const ResponsePiece s =
      parse_response_piece(R"({"choices":[],"timings":{"draft_tokens":40,"accepted_draft_tokens":31}})");
  EXPECT_EQ(s.draft_tokens, 40);
  EXPECT_EQ(s.accepted_draft_tokens, 31);
  const ResponsePiece ls = parse_response_piece(R"({"choices":[],"timings":{"draft_n":12,"draft_n_accepted":5}})");
  EXPECT_EQ(ls.draft_tokens, 12);
  EXPECT_EQ(ls.accepted_draft_tokens, 5);
}

TEST(ResponseParser, DoneErrorsAndGarbage) {
  EXPECT_TRUE(parse_response_piece("[DONE]").done);
  EXPECT_EQ(parse_response_piece(R"({"error":{"message":"KV cache exhausted","type":"x"}})").error,
            "KV cache exhausted");
  EXPECT_EQ(parse_response_piece(R"({"error":"boom"})").error, "boom");
  EXPECT_TRUE(parse_response_piece("{not json").malformed);
  EXPECT_TRUE(parse_response_piece("[1,2]").malformed);
  EXPECT_TRUE(parse_response_piece(R"({"object":"something else"})").malformed);
}

// Found with fuzz_bench_parsers: counts outside int64 were converted with
// undefined behaviour, and llama.cpp's prompt_n + cache_n could overflow.
TEST(ResponseParser, OutOfRangeCountsAreUnknown) {
  const ResponsePiece f =
      parse_response_piece(R"({"usage":{"prompt_tokens":1e300,"completion_tokens":18446744073709551615,)"
                           R"("prompt_tokens_details":{"cached_tokens":-1e30}}})");
  EXPECT_EQ(f.prompt_tokens, -1);
  EXPECT_EQ(f.completion_tokens, -1);
  EXPECT_EQ(f.cached_tokens, -1);
  EXPECT_EQ(parse_response_piece(R"({"usage":{"prompt_tokens":12.0}})").prompt_tokens, 12);
  const ResponsePiece l =
      parse_response_piece(R"({"choices":[{"text":""}],"timings":{"prompt_n":9223372036854775807,"cache_n":1}})");
  EXPECT_EQ(l.prompt_tokens, -1);
  EXPECT_EQ(l.cached_tokens, 1);
}

}  // namespace
}  // namespace tokenmill::bench
