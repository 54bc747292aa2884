#include "server/openai_request.h"

#include <gtest/gtest.h>

#include <cmath>

#include "server/api_error.h"

namespace tokenmill::server {
namespace {

const ParseLimits kLimits{/*n_vocab=*/1000};

// Runs fn, expecting ApiError 400 whose param and message name the problem.
template <typename Fn>
void expect_400(Fn fn, const std::string& param, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one about " << param;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.type(), "invalid_request_error");
    if (param.empty()) {
      EXPECT_FALSE(e.param().has_value());
    } else {
      EXPECT_EQ(e.param().value_or("<none>"), param) << e.what();
    }
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

void completion_400(const std::string& body, const std::string& param, const std::string& needle) {
  expect_400([&] { parse_completion_request(body, kLimits); }, param, needle);
}

void chat_400(const std::string& body, const std::string& param, const std::string& needle) {
  expect_400([&] { parse_chat_request(body, kLimits); }, param, needle);
}

TEST(CompletionRequest, AllFieldsParsed) {
  const CompletionRequest r = parse_completion_request(
      R"({"model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40,
          "min_p": 0.05, "seed": -1, "stop": ["\n", "END"], "n": 3, "presence_penalty": 0.5,
          "frequency_penalty": -0.25, "repetition_penalty": 1.1, "logit_bias": {"12": -100, "7": 2.5},
          "logprobs": 4, "echo": false, "stream": true, "stream_options": {"include_usage": true},
          "priority": "high", "ignore_eos": true, "user": "u", "speculative.n_max": 3})",
      kLimits);
  EXPECT_EQ(r.common.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_TRUE(r.prompts[0].is_text);
  EXPECT_EQ(r.prompts[0].text, "Hello");
  EXPECT_EQ(r.common.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.common.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.common.sampling.top_p, 0.9f);
  EXPECT_EQ(r.common.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.common.sampling.min_p, 0.05f);
  EXPECT_TRUE(r.common.seed_given);
  EXPECT_EQ(r.common.sampling.seed, ~uint64_t{0});  // -1 keeps its 64 bits
  EXPECT_EQ(r.common.sampling.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(r.common.n, 3);
  EXPECT_FLOAT_EQ(r.common.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.common.sampling.frequency_penalty, -0.25f);
  EXPECT_FLOAT_EQ(r.common.sampling.repetition_penalty, 1.1f);
  ASSERT_EQ(r.common.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(r.common.sampling.logit_bias[0].first, 12);
  EXPECT_FLOAT_EQ(r.common.sampling.logit_bias[0].second, -100.0f);
  EXPECT_TRUE(r.common.logprobs);
  EXPECT_EQ(r.common.top_logprobs, 4);
  EXPECT_TRUE(r.common.stream);
  EXPECT_TRUE(r.common.include_usage);
  EXPECT_EQ(r.common.priority, engine::Priority::kHigh);
  EXPECT_TRUE(r.common.sampling.ignore_eos);
  EXPECT_EQ(r.common.spec_max_draft, 3);
}

TEST(CompletionRequest, DefaultsAndNulls) {
  const CompletionRequest r =
      parse_completion_request(R"({"prompt": "x", "max_tokens": null, "temperature": null, "stop": null})", kLimits);
  EXPECT_FALSE(r.common.max_tokens.has_value());
  EXPECT_FLOAT_EQ(r.common.sampling.temperature, 1.0f);
  EXPECT_TRUE(r.common.sampling.stop.empty());
  EXPECT_FALSE(r.common.seed_given);
  EXPECT_FALSE(r.common.logprobs);
  EXPECT_EQ(r.common.n, 1);
  EXPECT_EQ(r.common.priority, engine::Priority::kNormal);
  EXPECT_EQ(r.common.sampling.top_k, 0);
  EXPECT_EQ(r.common.spec_max_draft, -1);
  EXPECT_THROW(parse_completion_request(R"({"prompt": "x", "speculative.n_max": 17})", kLimits), ApiError);
  EXPECT_THROW(parse_completion_request(R"({"prompt": "x", "speculative.n_max": -1})", kLimits), ApiError);
}

TEST(CompletionRequest, PromptShapes) {
  auto one = parse_completion_request(R"({"prompt": [1, 2, 999]})", kLimits);
  ASSERT_EQ(one.prompts.size(), 1u);
  EXPECT_FALSE(one.prompts[0].is_text);
  EXPECT_EQ(one.prompts[0].tokens, (std::vector<int32_t>{1, 2, 999}));
  auto texts = parse_completion_request(R"({"prompt": ["a", "b"]})", kLimits);
  ASSERT_EQ(texts.prompts.size(), 2u);
  EXPECT_EQ(texts.prompts[1].text, "b");
  auto lists = parse_completion_request(R"({"prompt": [[5], [6, 7]]})", kLimits);
  ASSERT_EQ(lists.prompts.size(), 2u);
  EXPECT_EQ(lists.prompts[1].tokens, (std::vector<int32_t>{6, 7}));
}

TEST(CompletionRequest, BadBodies) {
  completion_400("{\"prompt\": ", "", "not valid JSON");
  completion_400("[1, 2]", "", "must be a JSON object");
  completion_400(R"({"prompt": "x", "temperature": 1e999})", "", "not valid JSON");  // found by the fuzzer
  // Deep nesting is refused without recursing through it.
  completion_400("{\"prompt\": " + std::string(100000, '[') + std::string(100000, ']') + "}", "prompt",
                 "a list of 1 items");
  completion_400(R"({"max_tokens": 5})", "prompt", "'prompt' is required");
  completion_400(R"({"prompt": ""})", "prompt", "must not be empty");
  completion_400(R"({"prompt": []})", "prompt", "must not be empty");
  completion_400(R"({"prompt": [1, 1000]})", "prompt", "token id 1000 outside the vocabulary [0, 1000)");
  completion_400(R"({"prompt": [1, -2]})", "prompt", "outside the vocabulary");
  completion_400(R"({"prompt": [1, "a"]})", "prompt", "token ids");
  completion_400(R"({"prompt": [[1], []]})", "prompt", "empty list");
  completion_400(R"({"prompt": 5})", "prompt", "must be a string");
  completion_400(R"({"prompt": "x", "max_tokens": 0})", "max_tokens", "[1, ");
  completion_400(R"({"prompt": "x", "max_tokens": -3})", "max_tokens", "got -3");
  completion_400(R"({"prompt": "x", "max_tokens": 2.5})", "max_tokens", "integer");
  completion_400(R"({"prompt": "x", "max_tokens": "10"})", "max_tokens", "got \"10\"");
  completion_400(R"({"prompt": "x", "temperature": 2.5})", "temperature", "[0, 2]");
  completion_400(R"({"prompt": "x", "temperature": "hot"})", "temperature", "must be a number");
  completion_400(R"({"prompt": "x", "top_p": 0})", "top_p", "(0, 1]");
  completion_400(R"({"prompt": "x", "top_k": -2})", "top_k", "[-1, 1000]");
  completion_400(R"({"prompt": "x", "min_p": 1.5})", "min_p", "min_p");
  completion_400(R"({"prompt": "x", "presence_penalty": 3})", "presence_penalty", "[-2, 2]");
  completion_400(R"({"prompt": "x", "n": 0})", "n", "[1, 16]");
  completion_400(R"({"prompt": "x", "n": 17})", "n", "[1, 16]");
  completion_400(R"({"prompt": "x", "stop": ""})", "stop", "must not be empty");
  completion_400(R"({"prompt": "x", "stop": [1]})", "stop", "list of strings");
  completion_400(R"({"prompt": "x", "logit_bias": {"abc": 1}})", "logit_bias", "'abc' is not a token id");
  completion_400(R"({"prompt": "x", "logit_bias": {"1000": 1}})", "logit_bias", "not a token id");
  completion_400(R"({"prompt": "x", "logit_bias": {"5": 101}})", "logit_bias", "[-100, 100]");
  completion_400(R"({"prompt": "x", "logprobs": 21})", "logprobs", "[0, 20]");
  completion_400(R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options",
                 "only allowed when 'stream' is true");
  completion_400(R"({"prompt": "x", "priority": "urgent"})", "priority", "\"high\"");
  completion_400(R"({"prompt": "x", "max_token": 5})", "max_token", "unrecognized request argument 'max_token'");
  completion_400(R"({"prompt": "x", "suffix": "y"})", "suffix", "not supported");
  completion_400(R"({"prompt": "x", "best_of": 3})", "best_of", "not supported");
  completion_400(R"({"prompt": "x", "stream": "yes"})", "stream", "must be a boolean");
}

TEST(CompletionRequest, EchoAllowsZeroMaxTokens) {
  const CompletionRequest r = parse_completion_request(R"({"prompt": "x", "echo": true, "max_tokens": 0})", kLimits);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.common.max_tokens, 0);
}

TEST(ChatRequest, MessagesAndChatFields) {
  const ChatRequest r = parse_chat_request(
      R"({"model": "m", "messages": [{"role": "developer", "content": "Be brief."},
          {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
          {"role": "assistant", "content": "Hello", "name": "bot"}, {"role": "user", "content": "Again"}],
          "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 3, "tools": []})",
      kLimits);
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.common.max_tokens, 9);
  EXPECT_TRUE(r.common.logprobs);
  EXPECT_EQ(r.common.top_logprobs, 3);
  EXPECT_TRUE(r.add_generation_prompt);
}

TEST(ChatRequest, BadBodies) {
  chat_400(R"({"model": "m"})", "messages", "'messages' is required");
  chat_400(R"({"messages": []})", "messages", "non-empty list");
  chat_400(R"({"messages": ["hi"]})", "messages", "'messages[0]' must be an object");
  chat_400(R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role", "got \"wizard\"");
  chat_400(R"({"messages": [{"role": "user"}]})", "messages[0].content", "is required");
  chat_400(R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})",
           "messages[0].content", "only text is supported");
  chat_400(R"({"messages": [{"role": "user", "content": "x", "mood": 1}]})", "messages[0].mood", "unrecognized");
  chat_400(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs",
           "needs 'logprobs'");
  chat_400(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})", "tools",
           "not supported");
  chat_400(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 3})", "logprobs", "boolean");
  chat_400(R"({"messages": [{"role": "user", "content": "x"}], "echo": true})", "echo", "unrecognized");
}

TEST(TokenizeRequest, PromptOrMessages) {
  const TokenizeRequest t = parse_tokenize_request(R"({"prompt": "hi", "add_special_tokens": false})", kLimits);
  EXPECT_FALSE(t.is_chat);
  EXPECT_EQ(t.prompt, "hi");
  EXPECT_FALSE(t.add_special_tokens);
  const TokenizeRequest c = parse_tokenize_request(R"({"messages": [{"role": "user", "content": "x"}]})", kLimits);
  EXPECT_TRUE(c.is_chat);
  expect_400([] { parse_tokenize_request(R"({})", kLimits); }, "prompt", "exactly one");
  const DetokenizeRequest d = parse_detokenize_request(R"({"tokens": [3, 4]})", kLimits);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{3, 4}));
  expect_400([] { parse_detokenize_request(R"({"tokens": [3, 4000]})", kLimits); }, "tokens", "outside");
}

TEST(ApiErrorJson, Shape) {
  const ApiError e(404, "no such model", "invalid_request_error", "model", "model_not_found");
  const nlohmann::json j = e.to_json();
  EXPECT_EQ(j["error"]["message"], "no such model");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "model");
  EXPECT_EQ(j["error"]["code"], "model_not_found");
  const nlohmann::json k = error_for_status(413).to_json();
  EXPECT_TRUE(k["error"]["param"].is_null());
  EXPECT_EQ(k["error"]["code"], "request_too_large");
}

}  // namespace
}  // namespace tokenmill::server
