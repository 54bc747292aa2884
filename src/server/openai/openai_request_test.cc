#include "server/openai/openai_request.h"

#include <gtest/gtest.h>

#include <cmath>

#include "server/api_error.h"
#include "server/constraint_request.h"

namespace tokenmill::server {
namespace {

const ParseLimits kLimits{/*n_vocab=*/1000, /*json=*/{}};

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

TEST(CompletionRequest, KvPolicyField) {
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x"})", kLimits).common.kv_policy.has_value());
  const auto named = parse_completion_request(R"({"prompt": "x", "kv_policy": "streaming"})", kLimits);
  ASSERT_TRUE(named.common.kv_policy.has_value());
  EXPECT_EQ(named.common.kv_policy->describe(), "streaming(sinks=4,window=1024,positions=preserve)");
  const auto h2o = parse_completion_request(
      R"({"prompt": "x", "kv_policy": {"type": "h2o", "sinks": 0, "window": 64, "budget": 256, "positions": "rerotate"}})",
      kLimits);
  ASSERT_TRUE(h2o.common.kv_policy.has_value());
  EXPECT_EQ(h2o.common.kv_policy->describe(), "h2o(sinks=0,window=64,budget=256,positions=rerotate)");
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "x", "kv_policy": "full"})", kLimits).common.kv_policy->evicts());
  const auto param = [](const char* body) {
    try {
      parse_completion_request(body, kLimits);
    } catch (const ApiError& e) {
      return e.param().value_or("none");
    }
    return std::string("accepted");
  };
  EXPECT_EQ(param(R"({"prompt": "x", "kv_policy": {"type": "h2o", "budget": 8}})"), "kv_policy");
  EXPECT_EQ(param(R"({"prompt": "x", "kv_policy": {"window": 8}})"), "kv_policy.type");
  EXPECT_EQ(param(R"({"prompt": "x", "kv_policy": {"type": "streaming", "window": 0}})"), "kv_policy.window");
  EXPECT_EQ(param(R"({"prompt": "x", "kv_policy": {"type": "streaming", "sink": 2}})"), "kv_policy.sink");
  EXPECT_EQ(param(R"({"prompt": "x", "kv_policy": [1]})"), "kv_policy");
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
  // Deep nesting is refused while parsing, before the document is built.
  completion_400("{\"prompt\": " + std::string(100000, '[') + std::string(100000, ']') + "}", "",
                 "deeper than 1024 levels");
  // Within the bound it reaches the field checks, which do not recurse.
  completion_400("{\"prompt\": " + std::string(1000, '[') + std::string(1000, ']') + "}", "prompt",
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
  completion_400(R"({"prompt": "x", "max_token": 5})", "max_token",
                 "unrecognized request argument 'max_token' (did you mean 'max_tokens'?)");
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
  ASSERT_EQ(r.conversation.messages.size(), 4u);
  EXPECT_EQ(r.conversation.messages[0].role, "system");
  EXPECT_EQ(r.conversation.messages[1].content, "Hi there");
  EXPECT_EQ(r.conversation.messages[2].role, "assistant");
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
  chat_400(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})", "tools[0].function",
           "must be an object");
  chat_400(R"({"messages": [{"role": "user", "content": "x"}], "functions": [{"name": "f"}]})", "functions",
           "send 'tools'");
  chat_400(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 3})", "logprobs", "boolean");
  chat_400(R"({"messages": [{"role": "user", "content": "x"}], "echo": true})", "echo", "unrecognized");
}

using grammar::ConstraintKind;

// The constraint a completion body (the shared fields) asks for.
std::optional<OutputConstraint> constraint_of(const std::string& fields) {
  return parse_completion_request(R"({"prompt": "x", )" + fields + "}", kLimits).common.constraint;
}

void constraint_400(const std::string& fields, const std::string& param, const std::string& needle) {
  completion_400(R"({"prompt": "x", )" + fields + "}", param, needle);
  chat_400(R"({"messages": [{"role": "user", "content": "x"}], )" + fields + "}", param, needle);
}

TEST(ConstraintRequest, ResponseFormat) {
  EXPECT_FALSE(constraint_of(R"("response_format": {"type": "text"})"));
  EXPECT_FALSE(constraint_of(R"("response_format": null)"));
  auto obj = constraint_of(R"("response_format": {"type": "json_object"})");
  ASSERT_TRUE(obj);
  EXPECT_EQ(obj->spec.kind, ConstraintKind::kJsonObject);
  EXPECT_EQ(obj->param, "response_format");
  auto schema = constraint_of(
      R"("response_format": {"type": "json_schema", "json_schema": {"name": "My_schema-1", "description": "d",
         "strict": true, "schema": {"type": "object", "properties": {"z": {"type": "integer"}, "a": {}}}}})");
  ASSERT_TRUE(schema);
  EXPECT_EQ(schema->spec.kind, ConstraintKind::kJsonSchema);
  // The schema keeps its key order: properties are generated in it.
  EXPECT_EQ(schema->spec.text, R"({"type":"object","properties":{"z":{"type":"integer"},"a":{}}})");
  EXPECT_EQ(schema->param, "response_format");
  // llama.cpp's form: json_object with a schema.
  auto llama = constraint_of(R"("response_format": {"type": "json_object", "schema": {"type": "string"}})");
  ASSERT_TRUE(llama);
  EXPECT_EQ(llama->spec.kind, ConstraintKind::kJsonSchema);
  EXPECT_EQ(llama->spec.text, R"({"type":"string"})");
  // The same on chat.
  const ChatRequest c = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}})", kLimits);
  ASSERT_TRUE(c.common.constraint);
  EXPECT_EQ(c.common.constraint->spec.kind, ConstraintKind::kJsonObject);
}

TEST(ConstraintRequest, ResponseFormatErrors) {
  constraint_400(R"("response_format": "json")", "response_format", "must be an object");
  constraint_400(R"("response_format": {})", "response_format.type", "got nothing");
  constraint_400(R"("response_format": {"type": "xml"})", "response_format.type", "got \"xml\"");
  constraint_400(R"("response_format": {"type": "json_object", "extra": 1})", "response_format.extra", "unrecognized");
  constraint_400(R"("response_format": {"type": "json_schema"})", "response_format.json_schema", "must be an object");
  constraint_400(R"("response_format": {"type": "json_schema", "json_schema": {"schema": {}}})",
                 "response_format.json_schema.name", "is required");
  constraint_400(R"("response_format": {"type": "json_schema", "json_schema": {"name": "a b", "schema": {}}})",
                 "response_format.json_schema.name", "^[a-zA-Z0-9_-]{1,64}$");
  constraint_400(R"("response_format": {"type": "json_schema", "json_schema": {"name": ")" + std::string(65, 'a') +
                     R"(", "schema": {}}})",
                 "response_format.json_schema.name", "must match");
  constraint_400(R"("response_format": {"type": "json_schema", "json_schema": {"name": "n"}})",
                 "response_format.json_schema.schema", "is required");
  constraint_400(R"("response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": 5}})",
                 "response_format.json_schema.schema", "must be a JSON Schema");
  constraint_400(R"("response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {}, "x": 1}})",
                 "response_format.json_schema.x", "unrecognized");
  constraint_400(
      R"("response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {}, "strict": 1}})",
      "response_format.json_schema.strict", "boolean");
  constraint_400(R"("response_format": {"type": "text", "json_schema": {}})", "response_format.json_schema",
                 "needs type");
  constraint_400(R"("response_format": {"type": "json_schema", "schema": {}})", "response_format.schema",
                 "goes with type");
}

TEST(ConstraintRequest, VllmAndLlamaCppFields) {
  auto gj = constraint_of(R"("guided_json": {"type": "integer"})");
  ASSERT_TRUE(gj);
  EXPECT_EQ(gj->spec.kind, ConstraintKind::kJsonSchema);
  EXPECT_EQ(gj->param, "guided_json");
  auto gj_text = constraint_of(R"("guided_json": "{\"type\": \"integer\"}")");
  ASSERT_TRUE(gj_text);
  EXPECT_EQ(gj_text->spec.text, gj->spec.text);  // the same text, so one cached grammar
  auto re = constraint_of(R"("guided_regex": "[0-9]{3}")");
  ASSERT_TRUE(re);
  EXPECT_EQ(re->spec.kind, ConstraintKind::kRegex);
  EXPECT_EQ(re->spec.text, "[0-9]{3}");
  auto gg = constraint_of(R"("guided_grammar": "root ::= \"a\"")");
  ASSERT_TRUE(gg);
  EXPECT_EQ(gg->spec.kind, ConstraintKind::kGbnf);
  EXPECT_EQ(gg->param, "guided_grammar");
  auto choice = constraint_of(R"("guided_choice": ["yes", "no \"way\""])");
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->spec.kind, ConstraintKind::kGbnf);
  EXPECT_EQ(choice->spec.text, "root ::= \"yes\" | \"no \\\"way\\\"\"\n");
  auto llama_grammar = constraint_of(R"("grammar": "root ::= [a-z]+")");
  ASSERT_TRUE(llama_grammar);
  EXPECT_EQ(llama_grammar->param, "grammar");
  EXPECT_FALSE(constraint_of(R"("grammar": "")"));  // llama.cpp: no grammar
  auto llama_schema = constraint_of(R"("json_schema": {"type": "boolean"})");
  ASSERT_TRUE(llama_schema);
  EXPECT_EQ(llama_schema->spec.kind, ConstraintKind::kJsonSchema);
  EXPECT_EQ(llama_schema->param, "json_schema");
}

TEST(ConstraintRequest, StructuredOutputs) {
  auto j = constraint_of(R"("structured_outputs": {"json": {"type": "object"}})");
  ASSERT_TRUE(j);
  EXPECT_EQ(j->spec.kind, ConstraintKind::kJsonSchema);
  EXPECT_EQ(j->param, "structured_outputs");
  EXPECT_EQ(constraint_of(R"("structured_outputs": {"regex": "a+"})")->spec.kind, ConstraintKind::kRegex);
  EXPECT_EQ(constraint_of(R"("structured_outputs": {"grammar": "root ::= \"a\""})")->spec.kind, ConstraintKind::kGbnf);
  EXPECT_EQ(constraint_of(R"("structured_outputs": {"choice": ["a"]})")->spec.text, "root ::= \"a\"\n");
  EXPECT_EQ(constraint_of(R"("structured_outputs": {"json_object": true})")->spec.kind, ConstraintKind::kJsonObject);
  EXPECT_FALSE(constraint_of(R"("structured_outputs": {})"));
  EXPECT_FALSE(constraint_of(R"("structured_outputs": {"json_object": false})"));
  constraint_400(R"("structured_outputs": {"regex": "a", "choice": ["b"]})", "structured_outputs.choice",
                 "'structured_outputs.regex' and 'structured_outputs.choice'");
  constraint_400(R"("structured_outputs": {"whitespace_pattern": " "})", "structured_outputs.whitespace_pattern",
                 "unrecognized");
  constraint_400(R"("structured_outputs": [1])", "structured_outputs", "must be an object");
}

TEST(ConstraintRequest, Errors) {
  constraint_400(R"("guided_json": 5)", "guided_json", "must be a JSON Schema");
  constraint_400(R"("guided_json": "{not json")", "guided_json", "not valid JSON");
  constraint_400(R"("guided_json": "[1]")", "guided_json", "must be a JSON Schema");
  constraint_400(R"("json_schema": "{}")", "json_schema", "must be a JSON Schema");  // llama.cpp's takes objects only
  constraint_400(R"("guided_regex": "")", "guided_regex", "must not be empty");
  constraint_400(R"("guided_regex": 5)", "guided_regex", "must be a string");
  constraint_400(R"("guided_grammar": ["root"])", "guided_grammar", "must be a string");
  constraint_400(R"("guided_choice": [])", "guided_choice", "non-empty list");
  constraint_400(R"("guided_choice": ["a", 1])", "guided_choice", "strings only");
  constraint_400(R"("grammar": 1)", "grammar", "must be a string");
  // At most one constraint: the message names both fields.
  constraint_400(R"("response_format": {"type": "json_object"}, "guided_regex": "a")", "guided_regex",
                 "'response_format' and 'guided_regex' both constrain");
  constraint_400(R"("guided_json": {}, "json_schema": {})", "json_schema", "'guided_json' and 'json_schema'");
  constraint_400(R"("grammar": "root ::= \"a\"", "guided_choice": ["a"])", "grammar", "'guided_choice' and 'grammar'");
  // Text (and an empty llama.cpp grammar) is no constraint, so it combines.
  EXPECT_TRUE(constraint_of(R"("response_format": {"type": "text"}, "grammar": "", "guided_regex": "a")"));
  // Deep nesting is refused before anything recurses through it.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  constraint_400(R"("guided_json": {"enum": )" + deep + "}", "", "deeper than 1024 levels");
  const std::string deep_within = std::string(1000, '[') + std::string(1000, ']');
  constraint_400(R"("guided_json": {"enum": )" + deep_within + "}", "guided_json", "deeper than 512 levels");
  std::string nested = "{}";
  for (int i = 0; i < 300; ++i) nested = R"({"type": "object", "properties": {"a": )" + nested + "}}";
  constraint_400(R"("guided_json": )" + nested, "guided_json", "deeper than");
}

TEST(ConstraintRequest, GbnfLiteral) {
  EXPECT_EQ(gbnf_literal("a\"b\\c\n\r\t\x01\x7f é"), "\"a\\\"b\\\\c\\n\\r\\t\\x01\\x7F é\"");
  EXPECT_EQ(choice_gbnf({"", "x"}), "root ::= \"\" | \"x\"\n");
  EXPECT_TRUE(is_valid_name("get_weather-2"));
  EXPECT_FALSE(is_valid_name(""));
  EXPECT_FALSE(is_valid_name("a.b"));
  EXPECT_FALSE(is_valid_name(std::string(65, 'x')));
  EXPECT_TRUE(is_valid_name(std::string(64, 'x')));
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
