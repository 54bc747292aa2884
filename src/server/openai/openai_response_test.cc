#include "server/openai/openai_response.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "server/http_types.h"

namespace tokenmill::server {
namespace {

using nlohmann::json;

// A fake vocabulary: 1 -> "Hel", 2 -> "lo", 3 -> "\xe2\x80" (half a character).
std::string piece(int32_t id) {
  switch (id) {
    case 1: return "Hel";
    case 2: return "lo";
    case 3: return "\xe2\x80";
    default: return "?";
  }
}

TEST(OpenAiResponse, FinishReasons) {
  EXPECT_EQ(finish_reason_text(engine::FinishReason::kStop), "stop");
  EXPECT_EQ(finish_reason_text(engine::FinishReason::kLength), "length");
  EXPECT_EQ(finish_reason_text(engine::FinishReason::kCancelled), "cancelled");
}

TEST(OpenAiResponse, UsageAndTimings) {
  engine::Usage u{/*prompt_tokens=*/10, /*cached_prompt_tokens=*/4, /*completion_tokens=*/5};
  const json usage = usage_json(u);
  EXPECT_EQ(usage["total_tokens"], 15);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 4);
  engine::Timings t;
  t.queue_ms = 1;
  t.prefill_ms = 2;
  t.ttft_ms = 3;
  t.decode_ms = 200;  // 4 tokens after the first in 200 ms -> 20 tok/s
  const json timings = timings_json(t, u, engine::SpecStats{12, 7});
  EXPECT_DOUBLE_EQ(timings["decode_tokens_per_s"].get<double>(), 20.0);
  EXPECT_EQ(timings["draft_tokens"], 12);
  EXPECT_EQ(timings["accepted_draft_tokens"], 7);
  EXPECT_EQ(timings["cached_prompt_tokens"], 4);
  EXPECT_DOUBLE_EQ(timings["prompt_ms"].get<double>(), 2.0);
}

TEST(OpenAiResponse, TokenDisplay) {
  EXPECT_EQ(token_display("abc"), "abc");
  EXPECT_EQ(token_display("\xe2\x80"), "bytes:\\xe2\\x80");
}

TEST(OpenAiResponse, CompletionLogprobs) {
  std::vector<engine::TokenLogprob> lps(2);
  lps[0].logprob = -0.5f;
  lps[0].top = {{1, -0.5f}, {2, -1.5f}};
  lps[1].logprob = -std::numeric_limits<float>::infinity();  // a banned token was forced
  lps[1].top = {{1, -0.1f}};
  const json j = completion_logprobs_json({1, 3}, lps, /*offset0=*/7, piece);
  EXPECT_EQ(j["tokens"], json({"Hel", "bytes:\\xe2\\x80"}));
  EXPECT_EQ(j["text_offset"], json({7, 10}));
  EXPECT_DOUBLE_EQ(j["token_logprobs"][0].get<double>(), -0.5);
  EXPECT_DOUBLE_EQ(j["token_logprobs"][1].get<double>(), -9999.0);
  EXPECT_EQ(j["top_logprobs"][0].size(), 2u);
  EXPECT_DOUBLE_EQ(j["top_logprobs"][0]["lo"].get<double>(), -1.5);
  // The chosen token joins its alternatives (OpenAI returns up to logprobs + 1).
  EXPECT_EQ(j["top_logprobs"][1].size(), 2u);
  EXPECT_TRUE(j["top_logprobs"][1].contains("bytes:\\xe2\\x80"));
}

TEST(OpenAiResponse, ChatLogprobs) {
  std::vector<engine::TokenLogprob> lps(1);
  lps[0].logprob = -0.25f;
  lps[0].top = {{2, -0.25f}, {3, -2.0f}};
  const json j = chat_logprobs_json({2}, lps, piece);
  ASSERT_EQ(j["content"].size(), 1u);
  const json& c = j["content"][0];
  EXPECT_EQ(c["token"], "lo");
  EXPECT_EQ(c["bytes"], json({108, 111}));
  EXPECT_EQ(c["top_logprobs"][1]["bytes"], json({0xe2, 0x80}));
  EXPECT_TRUE(j["refusal"].is_null());
}

TEST(OpenAiResponse, BodiesAndChunks) {
  const ResponseMeta meta{"cmpl-1", 1700000000, "tiny"};
  ChoiceOutput c;
  c.text = "Hello";
  c.finish_reason = "length";
  c.logprobs = nullptr;
  const json body = completion_response(meta, {c}, usage_json({3, 0, 2}), json::object());
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "Hello");
  EXPECT_EQ(body["usage"]["total_tokens"], 5);
  const json chat = chat_response(meta, {c}, usage_json({3, 0, 2}), json::object());
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], "Hello");

  const json mid = completion_chunk(meta, 2, "lo", nullptr, std::nullopt, /*include_usage=*/true);
  EXPECT_EQ(mid["choices"][0]["index"], 2);
  EXPECT_TRUE(mid["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(mid.contains("usage") && mid["usage"].is_null());
  const json last = chat_chunk(meta, 0, json::object(), nullptr, std::string("stop"), false);
  EXPECT_EQ(last["object"], "chat.completion.chunk");
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(last.contains("usage"));
  const json u = usage_chunk(meta, "chat.completion.chunk", usage_json({3, 1, 2}), json::object());
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
}

TEST(OpenAiResponse, VllmPromptLogprobs) {
  // Prompt [1, 2, 3]: token 2 was the best guess after 1; token 3 ranked 4th
  // after [1, 2], and is not among the one alternative asked for.
  std::vector<engine::TokenLogprob> lps(2);
  lps[0] = {-0.5f, {{2, -0.5f}, {1, -1.5f}}, 1};
  lps[1] = {-3.0f, {{1, -0.25f}, {2, -2.0f}}, 4};
  const json j = vllm_prompt_logprobs_json({1, 2, 3}, lps, /*top=*/1, piece);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_TRUE(j[0].is_null());
  ASSERT_EQ(j[1].size(), 1u);  // the token is its own best alternative
  EXPECT_EQ(j[1]["2"]["rank"], 1);
  EXPECT_DOUBLE_EQ(j[1]["2"]["logprob"].get<double>(), -0.5);
  EXPECT_EQ(j[1]["2"]["decoded_token"], "lo");
  ASSERT_EQ(j[2].size(), 2u);
  EXPECT_EQ(j[2]["3"]["rank"], 4);
  EXPECT_EQ(j[2]["3"]["decoded_token"], "bytes:\\xe2\\x80");
  EXPECT_EQ(j[2]["1"]["rank"], 1);
  EXPECT_DOUBLE_EQ(j[2]["1"]["logprob"].get<double>(), -0.25);
  // Completions carry it per choice, chat at the top of the body.
  ChoiceOutput c;
  c.prompt_logprobs = j;
  const ResponseMeta meta{"id", 1, "m"};
  EXPECT_EQ(completion_response(meta, {c}, json::object(), json::object())["choices"][0]["prompt_logprobs"], j);
  const json chat = chat_response(meta, {c}, json::object(), json::object());
  EXPECT_EQ(chat["prompt_logprobs"], j);
  EXPECT_FALSE(chat["choices"][0].contains("prompt_logprobs"));
  EXPECT_FALSE(completion_response(meta, {ChoiceOutput{}}, json::object(), json::object())["choices"][0].contains(
      "prompt_logprobs"));
}

TEST(Sse, Framing) {
  const std::string e = sse_event(json{{"text", "a\nb"}});
  EXPECT_EQ(e, "data: {\"text\":\"a\\nb\"}\n\n");  // the newline stays escaped: one line per event
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
  // Invalid UTF-8 must not throw mid-stream.
  EXPECT_EQ(sse_event(json{{"t", std::string("\xff")}}), "data: {\"t\":\"\xef\xbf\xbd\"}\n\n");
}

}  // namespace
}  // namespace tokenmill::server
