#include "router/route_info.h"

#include <gtest/gtest.h>

#include <string>

namespace tokenmill::router {
namespace {

using nlohmann::json;

TEST(RouteInfo, CompletionPromptHead) {
  EXPECT_EQ(prompt_head(json{{"prompt", "hello world"}}, false, 5), "hello");
  EXPECT_EQ(prompt_head(json{{"prompt", "hi"}}, false, 256), "hi");
  // A list of prompts: concatenated in order.
  EXPECT_EQ(prompt_head(json{{"prompt", {"ab", "cd"}}}, false, 256), "abcd");
  int64_t total = 0;
  EXPECT_EQ(prompt_head(json{{"prompt", "0123456789"}}, false, 4, &total), "0123");
  EXPECT_EQ(total, 10);
}

TEST(RouteInfo, TokenPromptsShareBytesWhenTheyShareAPrefix) {
  int64_t total = 0;
  const std::string a = prompt_head(json{{"prompt", {1, 2, 3, 258}}}, false, 256, &total);
  EXPECT_EQ(total, 16);
  EXPECT_EQ(a, std::string("\x01\0\0\0\x02\0\0\0\x03\0\0\0\x02\x01\0\0", 16));
  const std::string b = prompt_head(json{{"prompt", {{1, 2, 3, 258, 9}}}}, false, 16);
  EXPECT_EQ(a, b);  // a list of token lists, longer: the same first 16 bytes
}

TEST(RouteInfo, ChatContentsConcatenatedInOrder) {
  const json body = {
      {"messages",
       {{{"role", "system"}, {"content", "Be brief. "}},
        {{"role", "user"},
         {"content",
          {{{"type", "text"}, {"text", "part one "}}, {{"type", "image_url"}}, {{"type", "text"}, {"text", "two"}}}}},
        {{"role", "assistant"}, {"content", nullptr}},
        {{"role", "user"}, {"content", " end"}}}}};
  int64_t total = 0;
  EXPECT_EQ(prompt_head(body, true, 256, &total), "Be brief. part one two end");
  EXPECT_EQ(total, 26);
  EXPECT_EQ(prompt_head(body, true, 8), "Be brief");
}

TEST(RouteInfo, OddBodiesNeverThrow) {
  EXPECT_EQ(prompt_head(json::array(), true, 10), "");
  EXPECT_EQ(prompt_head(json{{"messages", "x"}}, true, 10), "");
  EXPECT_EQ(prompt_head(json{{"messages", {1, {{"content", 5}}}}}, true, 10), "");
  EXPECT_EQ(prompt_head(json{{"prompt", {{{1}}}}}, false, 10), "");  // nested too deep: skipped
}

TEST(RouteInfo, TenantPrefersXTenant) {
  EXPECT_EQ(tenant_of("acme", "Bearer k1"), "acme");
  EXPECT_EQ(tenant_of("", "Bearer k1"), "Bearer k1");
  EXPECT_EQ(tenant_of("", ""), "");
}

TEST(RouteInfo, SharedPrefixSameKeyOtherPrefixOrTenantNot) {
  const std::string prefix(300, 'p');
  const auto body = [](const std::string& prompt) { return json{{"prompt", prompt}, {"max_tokens", 8}}.dump(); };
  const RouteInfo a = route_info(body(prefix + " question one"), false, "t", 256);
  const RouteInfo b = route_info(body(prefix + " another question"), false, "t", 256);
  const RouteInfo c = route_info(body("q" + prefix), false, "t", 256);
  const RouteInfo d = route_info(body(prefix + " question one"), false, "u", 256);
  EXPECT_EQ(a.affinity_key, b.affinity_key);
  EXPECT_NE(a.affinity_key, c.affinity_key);
  EXPECT_NE(a.affinity_key, d.affinity_key);
  // A shorter head tells the two apart only within its bytes.
  EXPECT_EQ(route_info(body("ab-1"), false, "t", 2).affinity_key, route_info(body("ab-2"), false, "t", 2).affinity_key);
  EXPECT_NE(route_info(body("ab-1"), false, "t", 4).affinity_key, route_info(body("ab-2"), false, "t", 4).affinity_key);
}

TEST(RouteInfo, ChatAndCompletionKeysAgreeOnTheSameText) {
  const RouteInfo chat = route_info(R"({"messages":[{"role":"user","content":"same text"}]})", true, "", 256);
  const RouteInfo completion = route_info(R"({"prompt":"same text"})", false, "", 256);
  EXPECT_EQ(chat.affinity_key, completion.affinity_key);
}

TEST(RouteInfo, StreamAndTokenEstimate) {
  RouteInfo r = route_info(R"({"prompt":"12345678","max_tokens":10,"stream":true})", false, "", 256);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.prompt_bytes, 8);
  EXPECT_EQ(r.estimated_tokens, 8 / 4 + 10);
  r = route_info(R"({"prompt":"12345678","max_tokens":10,"n":3})", false, "", 256);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.estimated_tokens, 2 + 3 * 10);
  r = route_info(R"({"prompt":"1234"})", false, "", 256);
  EXPECT_EQ(r.estimated_tokens, 1 + kDefaultMaxTokensEstimate);
  r = route_info(R"({"messages":[{"role":"user","content":"12345678"}],"max_completion_tokens":7,"max_tokens":99})",
                 true, "", 256);
  EXPECT_EQ(r.estimated_tokens, 2 + 7);
  r = route_info(R"({"prompt":"","max_tokens":2147483647})", false, "", 256);
  EXPECT_EQ(r.estimated_tokens, kMaxTokensEstimateCap);
}

TEST(RouteInfo, InvalidJsonIsKeyedOnRawBytes) {
  const RouteInfo a = route_info("not json at all", false, "t", 256);
  const RouteInfo b = route_info("not json at all", false, "t", 256);
  EXPECT_EQ(a.affinity_key, b.affinity_key);
  EXPECT_FALSE(a.stream);
  EXPECT_EQ(a.prompt_bytes, 15);
}

}  // namespace
}  // namespace tokenmill::router
