#include "server/llamacpp/llamacpp_infill.h"

#include <gtest/gtest.h>

#include "gguf/writer.h"
#include "server/api_error.h"
#include "tokenizer/test_util.h"

namespace tokenmill::server {
namespace {

using tokenizer::testing::spm_spec;

// A vocabulary with the given control tokens after the normal ones.
tokenizer::Tokenizer fim_vocab(const std::vector<std::string>& controls) {
  tokenizer::TokenizerSpec spec = spm_spec({{"\xE2\x96\x81", -1}, {"a", -2}, {"b", -3}, {"c", -4}});
  for (const std::string& c : controls) {
    spec.tokens.push_back(c);
    spec.types.push_back(tokenizer::TokenType::kControl);
    spec.scores.push_back(0.0f);
  }
  return tokenizer::Tokenizer::from_spec(spec);
}

gguf::GgufFile gguf_with(const std::vector<std::pair<std::string, int64_t>>& ids, std::vector<uint8_t>& keep) {
  gguf::GgufWriter w;
  w.set("general.architecture", gguf::Value::str("llama"));
  for (const auto& [key, id] : ids) w.set(key, gguf::Value::u32(static_cast<uint32_t>(id)));
  keep = w.to_bytes();
  return gguf::GgufFile::parse(keep, "test.gguf");
}

std::vector<int32_t> plain(const tokenizer::Tokenizer& tok, const std::string& text) {
  return tok.encode(text, false, false);
}

void append_ids(std::vector<int32_t>& to, const std::vector<int32_t>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

TEST(LlamaInfill, FimTokensFromKeysOldKeysAndTexts) {
  const tokenizer::Tokenizer plain_vocab = fim_vocab({});
  std::vector<uint8_t> bytes;
  const FimTokens none = find_fim_tokens(gguf_with({}, bytes), &plain_vocab);
  EXPECT_FALSE(none.usable());
  EXPECT_EQ(none.missing(), "prefix, suffix, middle");
  EXPECT_FALSE(find_fim_tokens(gguf_with({}, bytes), nullptr).usable());

  const FimTokens keys = find_fim_tokens(gguf_with({{"tokenizer.ggml.fim_pre_token_id", 10},
                                                    {"tokenizer.ggml.fim_suf_token_id", 11},
                                                    {"tokenizer.ggml.fim_mid_token_id", 12},
                                                    {"tokenizer.ggml.fim_sep_token_id", 99999}},  // out of range
                                                   bytes),
                                         &plain_vocab);
  EXPECT_TRUE(keys.usable());
  EXPECT_EQ(keys.pre, 10);
  EXPECT_EQ(keys.suf, 11);
  EXPECT_EQ(keys.mid, 12);
  EXPECT_EQ(keys.sep, -1);

  const FimTokens old = find_fim_tokens(
      gguf_with({{"tokenizer.ggml.prefix_token_id", 20}, {"tokenizer.ggml.suffix_token_id", 21}}, bytes), &plain_vocab);
  EXPECT_EQ(old.pre, 20);
  EXPECT_EQ(old.suf, 21);
  EXPECT_EQ(old.missing(), "middle");

  const tokenizer::Tokenizer star = fim_vocab({"<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<file_sep>"});
  const FimTokens texts = find_fim_tokens(gguf_with({}, bytes), &star);
  ASSERT_TRUE(texts.usable());
  EXPECT_EQ(star.token_text(texts.pre), "<fim_prefix>");
  EXPECT_EQ(star.token_text(texts.suf), "<fim_suffix>");
  EXPECT_EQ(star.token_text(texts.mid), "<fim_middle>");
  EXPECT_EQ(star.token_text(texts.sep), "<file_sep>");
  EXPECT_EQ(texts.rep, -1);
}

TEST(LlamaInfill, TakesItsFieldsOutOfTheBody) {
  RequestJson body = RequestJson::parse(
      R"({"input_prefix": "a", "input_suffix": "b", "prompt": "c", "temperature": 0,
          "input_extra": [{"filename": "f.py", "text": "x"}, {"text": "y"}]})");
  const InfillFields in = take_infill_fields(body);
  EXPECT_EQ(in.prefix, "a");
  EXPECT_EQ(in.suffix, "b");
  EXPECT_EQ(in.prompt, "c");
  ASSERT_EQ(in.extra.size(), 2u);
  EXPECT_EQ(in.extra[0].filename, "f.py");
  EXPECT_EQ(in.extra[1].filename, "tmp");  // llama.cpp's default name
  EXPECT_EQ(body, RequestJson::parse(R"({"temperature": 0})"));
  for (const char* bad : {R"({"input_extra": "x"})", R"({"input_extra": [3]})"}) {
    RequestJson b = RequestJson::parse(bad);
    try {
      take_infill_fields(b);
      ADD_FAILURE() << bad;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param().value_or(""), "input_extra");
    }
  }
  RequestJson unknown = RequestJson::parse(R"({"input_extra": [{"name": "x"}]})");
  EXPECT_THROW(take_infill_fields(unknown), ApiError);
  RequestJson not_text = RequestJson::parse(R"({"input_prefix": 3})");
  EXPECT_THROW(take_infill_fields(not_text), ApiError);
}

TEST(LlamaInfill, PromptInLlamaCppOrder) {
  const tokenizer::Tokenizer tok = fim_vocab({"<PRE>", "<SUF>", "<MID>"});
  const FimTokens fim{*tok.find_token("<PRE>"), *tok.find_token("<SUF>"), *tok.find_token("<MID>"), -1, -1};
  InfillFields in;
  in.prefix = "ab";
  in.suffix = "ca";
  in.prompt = "b";
  in.extra = {InfillChunk{"f", "cc"}};
  const ParseLimits limits{tok.vocab_size(), {}};
  const InfillPrompt p = build_infill_prompt(fim, tok, in, limits, 1000);
  // No repository tokens: the extra context goes first behind a snippet marker.
  std::vector<int32_t> want = plain(tok, "\n\n--- snippet ---\n\n");
  append_ids(want, plain(tok, "cc"));
  want.push_back(tok.bos_id());
  want.push_back(fim.pre);
  append_ids(want, plain(tok, "ab"));
  append_ids(want, tok.encode("b", false, true));
  want.push_back(fim.suf);
  append_ids(want, plain(tok, "ca"));
  want.push_back(fim.mid);
  EXPECT_EQ(p.tokens, want);
  EXPECT_FALSE(p.trimmed);
}

TEST(LlamaInfill, RepositoryContextWithRepoAndSepTokens) {
  const tokenizer::Tokenizer tok = fim_vocab({"<PRE>", "<SUF>", "<MID>", "<|repo_name|>", "<|file_sep|>"});
  FimTokens fim{*tok.find_token("<PRE>"), *tok.find_token("<SUF>"), *tok.find_token("<MID>"),
                *tok.find_token("<|repo_name|>"), *tok.find_token("<|file_sep|>")};
  InfillFields in;
  in.extra = {InfillChunk{"x.py", "a"}};
  const InfillPrompt p = build_infill_prompt(fim, tok, in, ParseLimits{tok.vocab_size(), {}}, 1000);
  std::vector<int32_t> want = {fim.rep};
  append_ids(want, plain(tok, "myproject\n"));
  want.push_back(fim.sep);
  append_ids(want, plain(tok, "x.py\n"));
  append_ids(want, plain(tok, "a"));
  want.push_back(fim.sep);
  append_ids(want, plain(tok, "filename\n"));
  want.push_back(tok.bos_id());
  append_ids(want, {fim.pre, fim.suf, fim.mid});  // empty prefix, prompt and suffix
  EXPECT_EQ(p.tokens, want);
}

TEST(LlamaInfill, TrimsToTheBudget) {
  const tokenizer::Tokenizer tok = fim_vocab({"<PRE>", "<SUF>", "<MID>"});
  const FimTokens fim{*tok.find_token("<PRE>"), *tok.find_token("<SUF>"), *tok.find_token("<MID>"), -1, -1};
  InfillFields in;
  in.prefix = std::string(40, 'a');
  in.suffix = std::string(40, 'b');
  in.extra = {InfillChunk{"f", std::string(40, 'c')}};
  const ParseLimits limits{tok.vocab_size(), {}};
  const std::vector<int32_t> prefix = plain(tok, in.prefix), suffix = plain(tok, in.suffix);
  const InfillPrompt p = build_infill_prompt(fim, tok, in, limits, 24);
  EXPECT_TRUE(p.trimmed);
  EXPECT_EQ(p.tokens.size(), 24u);
  // 20 tokens are left beside BOS and the three FIM tokens: 15 for the
  // prefix (its end), 5 for the suffix (its start), none for the extra.
  ASSERT_EQ(p.tokens[0], tok.bos_id());
  EXPECT_EQ(p.tokens[1], fim.pre);
  EXPECT_TRUE(std::equal(prefix.end() - 15, prefix.end(), p.tokens.begin() + 2));
  EXPECT_EQ(p.tokens[17], fim.suf);
  EXPECT_TRUE(std::equal(suffix.begin(), suffix.begin() + 5, p.tokens.begin() + 18));
  EXPECT_EQ(p.tokens.back(), fim.mid);
  // A short suffix leaves the rest to the prefix.
  in.suffix = "b";
  const InfillPrompt q = build_infill_prompt(fim, tok, in, limits, 24);
  EXPECT_EQ(q.tokens.size(), 24u);
  EXPECT_EQ(q.tokens[q.tokens.size() - 2 - plain(tok, "b").size()], fim.suf);
}

}  // namespace
}  // namespace tokenmill::server
