#include "server/llamacpp/llamacpp_request.h"

#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/openai/openai_request.h"
#include "tokenizer/test_util.h"

namespace tokenmill::server {
namespace {

using tokenizer::testing::spm_spec;

const tokenizer::Tokenizer& test_tok() {
  static const tokenizer::Tokenizer tok = [] {
    tokenizer::TokenizerSpec spec =
        spm_spec({{"\xE2\x96\x81", -1}, {"h", -2}, {"i", -3}, {"\xE2\x96\x81h", -4}, {"\xE2\x96\x81hi", -5}});
    spec.tokens.push_back("<|special|>");
    spec.types.push_back(tokenizer::TokenType::kControl);
    spec.scores.push_back(0.0f);
    return tokenizer::Tokenizer::from_spec(spec);
  }();
  return tok;
}

ParseLimits limits() { return ParseLimits{test_tok().vocab_size(), {}}; }

LlamaBody translate(const std::string& body, bool infill = false) {
  return translate_llama_body(body, infill, &test_tok(), limits());
}

// Runs fn and checks it throws a 400 naming `param`.
template <typename Fn>
void expect_llama_400(Fn fn, const std::string& param) {
  try {
    fn();
    ADD_FAILURE() << "no error for " << param;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param().value_or(""), param) << e.what();
  }
}

TEST(LlamaRequest, PromptForms) {
  EXPECT_EQ(translate(R"({"prompt": "hi"})").prompts.size(), 1u);
  EXPECT_EQ(translate(R"({"prompt": ["a", "b"]})").prompts.size(), 2u);   // strings: several prompts
  EXPECT_EQ(translate(R"({"prompt": [1, "a", 2]})").prompts.size(), 1u);  // ids with text: one prompt
  EXPECT_EQ(translate(R"({"prompt": [1, 2]})").prompts.size(), 1u);
  const LlamaBody many = translate(R"({"prompt": [[1, 2], "x", [3, "y"]]})");
  ASSERT_EQ(many.prompts.size(), 3u);
  EXPECT_EQ(many.prompts[2], RequestJson::parse(R"([3, "y"])"));
  EXPECT_FALSE(many.sampling.contains("prompt"));  // the handler puts the tokens back
  expect_llama_400([] { translate(R"({"prompt": [1, [2]]})"); }, "prompt");
  expect_llama_400([] { translate(R"({"prompt": []})"); }, "prompt");
  expect_llama_400([] { translate(R"({"n_predict": 3})"); }, "prompt");
  EXPECT_TRUE(translate(R"({"input_prefix": "a"})", /*infill=*/true).prompts.empty());
}

TEST(LlamaRequest, LlamaDefaultsOnlyWhereAbsent) {
  const RequestJson s = translate(R"({"prompt": "x"})").sampling;
  EXPECT_DOUBLE_EQ(s["temperature"].get<double>(), kLlamaDefaultTemperature);
  EXPECT_EQ(s["top_k"].get<int>(), kLlamaDefaultTopK);
  EXPECT_DOUBLE_EQ(s["top_p"].get<double>(), kLlamaDefaultTopP);
  EXPECT_DOUBLE_EQ(s["min_p"].get<double>(), kLlamaDefaultMinP);
  const RequestJson given = translate(R"({"prompt": "x", "temperature": 0, "top_k": 0, "top_p": 1})").sampling;
  EXPECT_EQ(given["temperature"].get<double>(), 0.0);
  EXPECT_EQ(given["top_k"].get<int>(), 0);
  EXPECT_EQ(given["top_p"].get<double>(), 1.0);
}

TEST(LlamaRequest, SeedsTemperatureStopAndNCmpl) {
  EXPECT_FALSE(translate(R"({"prompt": "x", "seed": -1})").sampling.contains("seed"));
  EXPECT_FALSE(translate(R"({"prompt": "x", "seed": 4294967295})").sampling.contains("seed"));
  EXPECT_EQ(translate(R"({"prompt": "x", "seed": 7})").sampling["seed"].get<int>(), 7);
  EXPECT_EQ(translate(R"({"prompt": "x", "temperature": -1})").sampling["temperature"].get<double>(), 0.0);
  EXPECT_EQ(translate(R"({"prompt": "x", "stop": ["", "a"]})").sampling["stop"], RequestJson::parse(R"(["a"])"));
  const RequestJson n = translate(R"({"prompt": "x", "n_cmpl": 3})").sampling;
  EXPECT_EQ(n["n"].get<int>(), 3);
  EXPECT_FALSE(n.contains("n_cmpl"));
}

TEST(LlamaRequest, LogitBiasPairs) {
  const RequestJson b = translate(R"({"prompt": "x", "logit_bias": [[5, 1.5], [6, false]]})").sampling["logit_bias"];
  EXPECT_EQ(b, RequestJson::parse(R"({"5": 1.5, "6": -100.0})"));
  const RequestJson text = translate(R"({"prompt": "x", "logit_bias": [["hi", -2]]})").sampling["logit_bias"];
  for (int32_t id : test_tok().encode("hi", false, false)) EXPECT_EQ(text[std::to_string(id)].get<double>(), -2.0);
  const RequestJson object = translate(R"({"prompt": "x", "logit_bias": {"5": 1}})").sampling["logit_bias"];
  EXPECT_EQ(object, RequestJson::parse(R"({"5": 1})"));  // OpenAI's form passes as it is
  expect_llama_400([] { translate(R"({"prompt": "x", "logit_bias": [[5, true]]})"); }, "logit_bias");
  expect_llama_400([] { translate(R"({"prompt": "x", "logit_bias": [[5]]})"); }, "logit_bias");
}

TEST(LlamaRequest, SamplersTokenmillLacksOnlyWhenOff) {
  const RequestJson s = translate(
                            R"({"prompt": "x", "dry_multiplier": 0, "dry_base": 1.75, "xtc_probability": 0,
          "top_n_sigma": -1, "dynatemp_range": 0, "t_max_predict_ms": 500, "n_indent": 4, "lora": []})")
                            .sampling;
  for (const char* gone : {"dry_multiplier", "dry_base", "xtc_probability", "top_n_sigma", "dynatemp_range",
                           "t_max_predict_ms", "n_indent", "lora"})
    EXPECT_FALSE(s.contains(gone)) << gone;
  expect_llama_400([] { translate(R"({"prompt": "x", "dry_multiplier": 0.8})"); }, "dry_multiplier");
  expect_llama_400([] { translate(R"({"prompt": "x", "xtc_probability": 0.5})"); }, "xtc_probability");
  expect_llama_400([] { translate(R"({"prompt": "x", "top_n_sigma": 2})"); }, "top_n_sigma");
  expect_llama_400([] { translate(R"({"prompt": "x", "post_sampling_probs": true})"); }, "post_sampling_probs");
  expect_llama_400([] { translate(R"({"prompt": "x", "echo": true})"); }, "echo");
}

// "lora" selects one adapter by its GET /lora-adapters index; scale 0 is
// off; other scales and two adapters at once are refused.
TEST(LlamaRequest, LoraSelectsOneAdapter) {
  EXPECT_FALSE(translate(R"({"prompt": "x", "lora": []})").lora_id);
  EXPECT_FALSE(translate(R"({"prompt": "x"})").lora_id);
  EXPECT_FALSE(translate(R"({"prompt": "x", "lora": [{"id": 0, "scale": 0}]})").lora_id);
  const LlamaBody b = translate(R"({"prompt": "x", "lora": [{"id": 0, "scale": 0}, {"id": 2, "scale": 1.0}]})");
  EXPECT_EQ(b.lora_id, 2);
  EXPECT_FALSE(b.sampling.contains("lora"));
  EXPECT_EQ(translate(R"({"prompt": "x", "lora": [{"id": 3}]})").lora_id, 3);
  expect_llama_400([] { translate(R"({"prompt": "x", "lora": [{"id": 0, "scale": 0.5}]})"); }, "lora[0]");
  expect_llama_400([] { translate(R"({"prompt": "x", "lora": [{"id": 0, "scale": 1}, {"id": 1, "scale": 1}]})"); },
                   "lora");
  expect_llama_400([] { translate(R"({"prompt": "x", "lora": [{"id": -1, "scale": 1}]})"); }, "lora[0]");
  expect_llama_400([] { translate(R"({"prompt": "x", "lora": [{"scale": 1}]})"); }, "lora[0]");
  expect_llama_400([] { translate(R"({"prompt": "x", "lora": [{"id": 0, "scale": "1"}]})"); }, "lora[0]");
  expect_llama_400([] { translate(R"({"prompt": "x", "lora": [{"id": 0, "alpha": 1}]})"); }, "lora[0]");
  expect_llama_400([] { translate(R"({"prompt": "x", "lora": {"id": 0}})"); }, "lora");
}

TEST(LlamaRequest, ResponseOptionsAreTakenOut) {
  const LlamaBody b = translate(
      R"({"prompt": "x", "return_tokens": true, "response_fields": ["content"], "id_slot": 2, "stream": true})");
  EXPECT_TRUE(b.return_tokens);
  EXPECT_EQ(b.response_fields, std::vector<std::string>{"content"});
  EXPECT_EQ(b.id_slot, 2);
  EXPECT_TRUE(b.stream);
  EXPECT_FALSE(b.sampling.contains("return_tokens"));
  EXPECT_FALSE(b.sampling.contains("response_fields"));
  EXPECT_EQ(translate(R"({"prompt": "x", "id_slot": -1})").id_slot, -1);
  expect_llama_400([] { translate(R"({"prompt": "x", "response_fields": "content"})"); }, "response_fields");
  expect_llama_400([] { translate(R"({"prompt": "x", "return_tokens": 1})"); }, "return_tokens");
}

TEST(LlamaRequest, TranslatedBodyParsesWithTheCompletionsParser) {
  LlamaBody b = translate(R"({"prompt": "x", "logit_bias": [[5, 2]], "seed": -1, "stop": ["\n"]})");
  b.sampling["prompt"] = std::vector<std::vector<int32_t>>{{1, 2}};
  const CompletionRequest r = parse_completion_request(b.sampling.dump(), limits());
  EXPECT_FLOAT_EQ(r.common.sampling.temperature, 0.8f);
  EXPECT_EQ(r.common.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.common.sampling.min_p, 0.05f);
  EXPECT_FALSE(r.common.seed_given);
  ASSERT_EQ(r.common.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(r.common.sampling.logit_bias[0].first, 5);
  EXPECT_EQ(r.common.sampling.stop, std::vector<std::string>{"\n"});
}

TEST(LlamaRequest, TokenizesEveryPromptForm) {
  const tokenizer::Tokenizer& tok = test_tok();
  const std::vector<int32_t> hi = tok.encode("hi", /*add_special=*/false, /*parse_special=*/true);
  std::vector<int32_t> with_bos = {tok.bos_id()};
  with_bos.insert(with_bos.end(), hi.begin(), hi.end());
  EXPECT_EQ(tokenize_llama_prompt("hi", &tok, limits(), true, "prompt"), with_bos);
  EXPECT_EQ(tokenize_llama_prompt("hi", &tok, limits(), false, "prompt"), hi);
  // Ids first: no BOS is added; text after them has none either.
  std::vector<int32_t> mixed = {7, 8};
  mixed.insert(mixed.end(), hi.begin(), hi.end());
  EXPECT_EQ(tokenize_llama_prompt(RequestJson::parse(R"([7, 8, "hi"])"), &tok, limits(), true, "prompt"), mixed);
  // Special-token texts become the token, as llama.cpp's /completion does.
  const int32_t special = *tok.find_token("<|special|>");
  const std::vector<int32_t> s = tokenize_llama_prompt("<|special|>", &tok, limits(), false, "prompt");
  EXPECT_NE(std::find(s.begin(), s.end(), special), s.end());
  expect_llama_400([&] { tokenize_llama_prompt(RequestJson::parse("[1, 99999]"), &tok, limits(), true, "prompt"); },
                   "prompt");
  expect_llama_400([&] { tokenize_llama_prompt(RequestJson::parse("[1, -1]"), &tok, limits(), true, "prompt"); },
                   "prompt");
  expect_llama_400([&] { tokenize_llama_prompt("hi", nullptr, limits(), true, "prompt"); }, "prompt");
  EXPECT_EQ(tokenize_llama_prompt(RequestJson::parse("[4, 5]"), nullptr, limits(), true, "prompt"),
            (std::vector<int32_t>{4, 5}));
}

TEST(LlamaRequest, ResponseFieldsSelectAndLift) {
  const nlohmann::json r = {{"content", "x"}, {"stop", true}, {"generation_settings", {{"n_predict", 5}}}};
  EXPECT_EQ(select_response_fields(r, {}), r);
  const nlohmann::json picked = select_response_fields(r, {"content", "generation_settings/n_predict", "missing"});
  EXPECT_EQ(picked, nlohmann::json::parse(R"({"content": "x", "generation_settings/n_predict": 5})"));
}

TEST(LlamaRequest, TokenizeAcceptsLlamaShape) {
  const TokenizeRequest l = parse_tokenize_request(R"({"content": "hi", "with_pieces": true})", limits());
  EXPECT_TRUE(l.llama_shape);
  EXPECT_EQ(l.prompt, "hi");
  EXPECT_FALSE(l.add_special_tokens);  // llama.cpp's defaults
  EXPECT_TRUE(l.parse_special);
  EXPECT_TRUE(l.with_pieces);
  const TokenizeRequest t = parse_tokenize_request(R"({"prompt": "hi"})", limits());
  EXPECT_FALSE(t.llama_shape);
  EXPECT_TRUE(t.add_special_tokens);
  EXPECT_FALSE(t.parse_special);
  EXPECT_TRUE(parse_tokenize_request(R"({"content": "hi", "add_special": true})", limits()).add_special_tokens);
  expect_llama_400([] { parse_tokenize_request(R"({"content": "a", "prompt": "b"})", limits()); }, "prompt");
  expect_llama_400([] { parse_tokenize_request(R"({"content": 3})", limits()); }, "content");
  expect_llama_400(
      [] { parse_tokenize_request(R"({"content": "a", "add_special": true, "add_special_tokens": false})", limits()); },
      "add_special");
}

}  // namespace
}  // namespace tokenmill::server
