// The extension fields of the generation endpoints (request_extensions.h):
// each is read with its meaning, aliases must agree with their standard
// fields, refusals say "not supported" and name the field, and typos get a
// did-you-mean.
#include "server/request_extensions.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace tokenmill::server {
namespace {

const ParseLimits kExtLimits{/*n_vocab=*/1000, /*json=*/{}};

CompletionRequest ext_completion(const std::string& fields) {
  return parse_completion_request(R"({"prompt": "x", )" + fields + "}", kExtLimits);
}

ChatRequest ext_chat(const std::string& fields, const std::string& messages = R"([{"role": "user", "content": "x"}])") {
  return parse_chat_request(R"({"messages": )" + messages + ", " + fields + "}", kExtLimits);
}

// Expects ApiError 400 whose param is `param` and whose message holds `needle`.
template <typename Fn>
void expect_ext_400(Fn fn, const std::string& param, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one about " << param;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param().value_or("<none>"), param) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

void completion_ext_400(const std::string& fields, const std::string& param, const std::string& needle) {
  expect_ext_400([&] { ext_completion(fields); }, param, needle);
}

TEST(RequestExtensions, VllmFieldsParsed) {
  const CompletionRequest r = ext_completion(
      R"("max_tokens": 9, "min_tokens": 3, "stop_token_ids": [5, 7], "include_stop_str_in_output": true,
         "skip_special_tokens": false, "spaces_between_special_tokens": false, "prompt_logprobs": 2,
         "add_special_tokens": false, "bad_words": ["foo", " bar"], "allowed_token_ids": [1, 2, 3],
         "truncate_prompt_tokens": 5, "use_beam_search": false)");
  const sample::SamplingParams& s = r.common.sampling;
  EXPECT_EQ(s.min_tokens, 3);
  EXPECT_EQ(s.stop_token_ids, (std::vector<int32_t>{5, 7}));
  EXPECT_TRUE(s.include_stop_str_in_output);
  EXPECT_FALSE(s.skip_special_tokens);
  EXPECT_FALSE(s.spaces_between_special_tokens);
  EXPECT_EQ(r.common.prompt_logprobs, 2);
  EXPECT_EQ(r.common.add_special_tokens, false);
  EXPECT_EQ(r.common.bad_words, (std::vector<std::string>{"foo", " bar"}));
  EXPECT_EQ(s.allowed_token_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.common.truncate_prompt_tokens, 5);
}

TEST(RequestExtensions, DefaultsChangeNothing) {
  const CompletionRequest r = ext_completion(R"("max_tokens": 4)");
  const sample::SamplingParams& s = r.common.sampling;
  EXPECT_EQ(s.min_tokens, 0);
  EXPECT_TRUE(s.stop_token_ids.empty() && s.allowed_token_ids.empty() && s.bad_words_ids.empty());
  EXPECT_TRUE(s.skip_special_tokens);
  EXPECT_TRUE(s.spaces_between_special_tokens);
  EXPECT_FALSE(s.include_stop_str_in_output);
  EXPECT_FLOAT_EQ(s.typical_p, 1.0f);
  EXPECT_EQ(r.common.prompt_logprobs, -1);
  EXPECT_FALSE(r.common.add_special_tokens.has_value());
  EXPECT_FALSE(r.common.n_keep.has_value());
  EXPECT_FALSE(r.common.max_tokens_to_context);
}

TEST(RequestExtensions, VllmFieldErrors) {
  completion_ext_400(R"("max_tokens": 4, "min_tokens": 5)", "min_tokens", "must not exceed max_tokens (4)");
  completion_ext_400(R"("min_tokens": -1)", "min_tokens", "[0, ");
  completion_ext_400(R"("stop_token_ids": [1000])", "stop_token_ids", "[0, 1000)");
  completion_ext_400(R"("stop_token_ids": 5)", "stop_token_ids", "list of token ids");
  completion_ext_400(R"("allowed_token_ids": [])", "allowed_token_ids", "must not be empty");
  completion_ext_400(R"("allowed_token_ids": ["a"])", "allowed_token_ids", "token ids");
  completion_ext_400(R"("bad_words": ["  "])", "bad_words", "non-blank");
  completion_ext_400(R"("bad_words": "x")", "bad_words", "list of strings");
  completion_ext_400(R"("prompt_logprobs": 21)", "prompt_logprobs", "[0, 20]");
  completion_ext_400(R"("prompt_logprobs": 1, "stream": true)", "prompt_logprobs", "not supported with 'stream'");
  completion_ext_400(R"("truncate_prompt_tokens": 0)", "truncate_prompt_tokens", "-1");
  completion_ext_400(R"("use_beam_search": true)", "use_beam_search", "'use_beam_search' is not supported");
  completion_ext_400(R"("skip_special_tokens": 1)", "skip_special_tokens", "boolean");
}

TEST(RequestExtensions, PromptLogprobsAllowZeroMaxTokens) {
  const CompletionRequest r = ext_completion(R"("max_tokens": 0, "prompt_logprobs": 0)");
  EXPECT_EQ(r.common.max_tokens, 0);
  EXPECT_EQ(r.common.prompt_logprobs, 0);
  completion_ext_400(R"("max_tokens": 0)", "max_tokens", "[1, ");
}

TEST(RequestExtensions, OpenAiHintsAcceptedOrRefused) {
  const CompletionRequest r = ext_completion(
      R"("reasoning_effort": "low", "modalities": ["text"],
         "prediction": {"type": "content", "content": "x"})");
  EXPECT_EQ(r.common.n, 1);
  completion_ext_400(R"("modalities": ["text", "audio"])", "modalities", "\"audio\" is not supported");
  completion_ext_400(R"("reasoning_effort": 3)", "reasoning_effort", "string");
  completion_ext_400(R"("prediction": "x")", "prediction", "object");
}

TEST(RequestExtensions, LlamaCppNamesMapToTheirMeaning) {
  const CompletionRequest r = ext_completion(
      R"("n_predict": 12, "n_probs": 3, "repeat_penalty": 1.2, "repeat_last_n": 32, "typical_p": 0.8,
         "n_keep": 4, "cache_prompt": true, "id_slot": -1, "timings_per_token": false, "mirostat": 0,
         "mirostat_tau": 5.0, "mirostat_eta": 0.1)");
  EXPECT_EQ(r.common.max_tokens, 12);
  EXPECT_TRUE(r.common.logprobs);
  EXPECT_EQ(r.common.top_logprobs, 3);
  EXPECT_FLOAT_EQ(r.common.sampling.repetition_penalty, 1.2f);
  EXPECT_EQ(r.common.sampling.penalty_last_n, 32);
  EXPECT_FLOAT_EQ(r.common.sampling.typical_p, 0.8f);
  EXPECT_EQ(r.common.n_keep, 4);
  EXPECT_TRUE(ext_completion(R"("n_predict": -1)").common.max_tokens_to_context);
  EXPECT_EQ(ext_completion(R"("n_predict": 6, "max_tokens": 6)").common.max_tokens, 6);
  EXPECT_FALSE(ext_completion(R"("n_probs": 0)").common.logprobs);
  const ChatRequest c = ext_chat(R"("n_predict": 5, "n_probs": 2)");
  EXPECT_EQ(c.common.max_tokens, 5);
  EXPECT_TRUE(c.common.logprobs);
  EXPECT_EQ(c.common.top_logprobs, 2);
}

TEST(RequestExtensions, LlamaCppNameConflictsAndRefusals) {
  completion_ext_400(R"("n_predict": 5, "max_tokens": 6)", "n_predict", "'n_predict' (5) and 'max_tokens' (6) differ");
  completion_ext_400(R"("n_predict": -1, "max_tokens": 6)", "n_predict", "differ");
  completion_ext_400(R"("n_predict": 0)", "n_predict", "-1");
  completion_ext_400(R"("n_probs": 3, "logprobs": 2)", "n_probs", "different logprobs");
  completion_ext_400(R"("repeat_penalty": 1.2, "repetition_penalty": 1.1)", "repeat_penalty", "differ");
  completion_ext_400(R"("typical_p": 0)", "typical_p", "(0, 1]");
  completion_ext_400(R"("repeat_last_n": -2)", "repeat_last_n", "[-1, ");
  completion_ext_400(R"("mirostat": 2)", "mirostat", "'mirostat' is not supported");
  completion_ext_400(R"("n_keep": -2)", "n_keep", "[-1, ");
  expect_ext_400([] { ext_chat(R"("n_probs": 2, "logprobs": true, "top_logprobs": 1)"); }, "n_probs", "different");
  EXPECT_EQ(ext_completion(R"("repeat_penalty": 1.1, "repetition_penalty": 1.1)").common.sampling.repetition_penalty,
            1.1f);
}

TEST(RequestExtensions, SamplerOrderHonouredOrRefused) {
  // Listed in tokenmill's order: the steps left out are off.
  const CompletionRequest r = ext_completion(
      R"("samplers": ["top_k", "dry", "top_p", "temperature"], "top_k": 5, "top_p": 0.5, "min_p": 0.2,
         "typical_p": 0.5, "repetition_penalty": 1.3, "temperature": 0.7)");
  const sample::SamplingParams& s = r.common.sampling;
  EXPECT_EQ(s.top_k, 5);
  EXPECT_FLOAT_EQ(s.top_p, 0.5f);
  EXPECT_FLOAT_EQ(s.min_p, 0.0f);
  EXPECT_FLOAT_EQ(s.typical_p, 1.0f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.0f);
  EXPECT_FLOAT_EQ(s.temperature, 0.7f);
  // llama.cpp's letters, its default order included.
  const sample::SamplingParams l = ext_completion(R"("samplers": "edskypmxt", "min_p": 0.1)").common.sampling;
  EXPECT_FLOAT_EQ(l.min_p, 0.1f);
  completion_ext_400(R"("samplers": ["temperature", "top_k"])", "samplers", "'top_k' comes too late");
  completion_ext_400(R"("samplers": ["top_k", "top_k"])", "samplers", "order is not supported");
  completion_ext_400(R"("samplers": ["infill"])", "samplers", "'infill' is not supported");
  completion_ext_400(R"("samplers": ["magic"])", "samplers", "unknown sampler 'magic'");
  completion_ext_400(R"("samplers": "kq")", "samplers", "letter 'q'");
  completion_ext_400(R"("samplers": ["top_k"], "temperature": 0.5)", "samplers", "without 'temperature'");
}

TEST(RequestExtensions, ChatTemplateKwargsAndContinuation) {
  EXPECT_FALSE(ext_chat(R"("chat_template_kwargs": {"add_generation_prompt": false})").add_generation_prompt);
  // Other keys are template variables.
  EXPECT_EQ(ext_chat(R"("chat_template_kwargs": {"enable_thinking": false})").conversation.template_kwargs,
            RequestJson::parse(R"({"enable_thinking": false})"));
  EXPECT_EQ(ext_chat(R"("reasoning_effort": "low")").conversation.reasoning_effort, "low");
  expect_ext_400(
      [] { ext_chat(R"("chat_template_kwargs": {"add_generation_prompt": false}, "add_generation_prompt": true)"); },
      "chat_template_kwargs.add_generation_prompt", "differ");
  const std::string open = R"([{"role": "user", "content": "x"}, {"role": "assistant", "content": "Once"}])";
  const ChatRequest c = ext_chat(R"("continue_final_message": true)", open);
  EXPECT_TRUE(c.continue_final_message);
  EXPECT_FALSE(c.add_generation_prompt);
  expect_ext_400([&] { ext_chat(R"("continue_final_message": true, "add_generation_prompt": true)", open); },
                 "continue_final_message", "cannot both be true");
  expect_ext_400([] { ext_chat(R"("continue_final_message": true)"); }, "continue_final_message", "assistant");
  EXPECT_FALSE(ext_chat(R"("add_special_tokens": false)").common.add_special_tokens.value());
  // Chat-only fields are unknown to completions.
  completion_ext_400(R"("continue_final_message": true)", "continue_final_message", "unrecognized");
}

TEST(RequestExtensions, TyposGetADidYouMean) {
  completion_ext_400(R"("max_token": 5)", "max_token",
                     "unrecognized request argument 'max_token' (did you mean 'max_tokens'?)");
  completion_ext_400(R"("stop_token_id": [1])", "stop_token_id", "did you mean 'stop_token_ids'?");
  completion_ext_400(R"("temprature": 1)", "temprature", "did you mean 'temperature'?");
  completion_ext_400(R"("stream": true, "stream_options": {"include_usag": true})", "stream_options.include_usag",
                     "did you mean 'stream_options.include_usage'?");
  // Nothing near: no guess.
  completion_ext_400(R"("frobnicate": 1)", "frobnicate", "see docs/api.md");
  completion_ext_400(R"("xy": 1)", "xy", "see docs/api.md");
}

TEST(EditDistance, CountsEditsAndSwaps) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("max_token", "max_tokens"), 1u);
  EXPECT_EQ(edit_distance("max_tokesn", "max_tokens"), 1u);  // one swap
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  const std::set<std::string, std::less<>> known = {"top_k", "top_p", "temperature"};
  EXPECT_EQ(closest_field("top_q", known), "top_k");  // a tie goes to the first in order
  EXPECT_EQ(closest_field("tempreature", known), "temperature");
  EXPECT_FALSE(closest_field("top", known).has_value());  // too short to guess from
  EXPECT_FALSE(closest_field("banana", known).has_value());
}

}  // namespace
}  // namespace tokenmill::server
