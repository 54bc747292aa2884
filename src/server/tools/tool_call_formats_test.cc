// Each family's tool-call format: hand-written model outputs parse into
// the expected content, reasoning and calls, and the streamed parse fed in
// every split (1..7 bytes at a time, and random chunkings with a fixed
// seed) concatenates to exactly the whole parse.
#include <gtest/gtest.h>

#include <random>

#include "server/tools/tool_call_parser.h"

namespace tokenmill::server {
namespace {

struct Call {
  std::string name;
  std::string arguments;
};

struct Case {
  std::string text;
  std::string content;
  std::vector<Call> calls;
  std::string reasoning = "";
};

// Feeds `pieces` and merges every delta, checking the streaming contract on
// the way: a call's first delta carries its name, indexes only grow.
ParsedChoice parse_pieces(const std::vector<std::string>& pieces, ToolCallFormat format) {
  ToolCallParser parser(format);
  ParsedChoice out;
  auto take = [&](ParsedOutput&& piece) {
    out.content += piece.content;
    out.reasoning += piece.reasoning;
    for (ToolCallDelta& d : piece.calls) {
      if (!d.name.empty()) {
        EXPECT_EQ(static_cast<size_t>(d.index), out.calls.size());
        out.calls.push_back({d.name, ""});
      }
      EXPECT_EQ(static_cast<size_t>(d.index) + 1, out.calls.size());
      if (!out.calls.empty()) out.calls.back().arguments += d.arguments;
    }
    EXPECT_EQ(parser.num_calls(), static_cast<int>(out.calls.size()));
  };
  for (const std::string& p : pieces) take(parser.feed(p));
  take(parser.finish());
  return out;
}

void expect_same(const ParsedChoice& got, const ParsedChoice& want, const std::string& what) {
  EXPECT_EQ(got.content, want.content) << what;
  EXPECT_EQ(got.reasoning, want.reasoning) << what;
  ASSERT_EQ(got.calls.size(), want.calls.size()) << what;
  for (size_t i = 0; i < got.calls.size(); ++i) {
    EXPECT_EQ(got.calls[i].name, want.calls[i].name) << what;
    EXPECT_EQ(got.calls[i].arguments, want.calls[i].arguments) << what;
  }
}

void expect_same_every_split(const std::string& text, ToolCallFormat format) {
  const ParsedChoice whole = parse_tool_calls(text, format);
  for (size_t step = 1; step <= 7; ++step) {
    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size(); i += step) pieces.push_back(text.substr(i, step));
    expect_same(parse_pieces(pieces, format), whole, "step " + std::to_string(step) + ": " + text);
  }
  std::mt19937 rng(1234);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size();) {
      const size_t n = std::uniform_int_distribution<size_t>(0, 12)(rng);
      pieces.push_back(text.substr(i, n));
      i += n;
    }
    expect_same(parse_pieces(pieces, format), whole, "random chunks: " + text);
  }
}

void expect_cases(ToolCallFormat format, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(tool_call_format_name(format)) + ": " + c.text);
    const ParsedChoice p = parse_tool_calls(c.text, format);
    EXPECT_EQ(p.content, c.content);
    EXPECT_EQ(p.reasoning, c.reasoning);
    ASSERT_EQ(p.calls.size(), c.calls.size());
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(p.calls[i].name, c.calls[i].name);
      EXPECT_EQ(p.calls[i].arguments, c.calls[i].arguments);
    }
    expect_same_every_split(c.text, format);
  }
}

TEST(ToolCallFormats, Hermes) {
  expect_cases(ToolCallFormat::kHermes,
               {{"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", "", {{"f", "{\"a\": 1}"}}},
                {"Hi\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", "
                 "\"arguments\": {\"x\": \"</tool_call>\"}}\n</tool_call>\nBye",
                 "HiBye",
                 {{"f", "{}"}, {"g", "{\"x\": \"</tool_call>\"}"}}},
                {"plain <tool_call> text", "plain <tool_call> text", {}},
                {"<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>",
                 "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>",
                 {}},
                {"<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [[}\n</tool_call>", "", {{"f", "{\"a\": [[}"}}},
                // Malformed arguments that open brackets: the tag still ends the call.
                {"<tool_call>{\"name\": \"f\", \"arguments\": x\"s\": {\"a\":1\n</tool_call>",
                 "",
                 {{"f", "x\"s\": {\"a\":1"}}}});
}

TEST(ToolCallFormats, Qwen3Coder) {
  const std::string call =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis, \"FR\"\n</parameter>\n<parameter=days>\n3\n"
      "</parameter>\n<parameter=opts>\n{\"unit\": \"C\"}\n</parameter>\n</function>\n</tool_call>";
  const std::string args = R"({"city": "Paris, \"FR\"", "days": 3, "opts": {"unit": "C"}})";
  expect_cases(
      ToolCallFormat::kQwen3Coder,
      {{call, "", {{"get_weather", args}}},
       {"Let me look.\n\n" + call + "\n" + call + "\nDone",
        "Let me look.Done",
        {{"get_weather", args}, {"get_weather", args}}},
       {"<tool_call>\n<function=now>\n</function>\n</tool_call>", "", {{"now", "{}"}}},
       {"<tool_call>\n<function=f>\n<parameter=s>\ntrue "
        "story\n</parameter>\n<parameter=t>\nline1\nline2\n</parameter>\n"
        "</function>\n</tool_call>",
        "",
        {{"f", R"({"s": "true story", "t": "line1\nline2"})"}}},
       // Hermes JSON inside the tag is accepted too.
       {"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", "", {{"f", "{\"a\": 1}"}}},
       // Cut short: the open value and object are closed.
       {"<tool_call>\n<function=f>\n<parameter=q>\nhello wor", "", {{"f", R"({"q": "hello wor"})"}}},
       {"<tool_call>\n<function=f>\n<parameter=n>\n12", "", {{"f", R"({"n": 12})"}}},
       // </function> left out; a parameter name may not run across tags.
       {"<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>x", "x", {{"f", R"({"a": 1})"}}},
       {"<tool_call>\n<function=f>\n<parameter=a\n</function>\n</tool_call>",
        "a\n</function>\n</tool_call>",
        {{"f", ""}}},
       // Malformed: content, as written.
       {"<tool_call>\n<func=x>\n</tool_call> ok", "<tool_call>\n<func=x>\n</tool_call> ok", {}},
       {"a <tool_call", "a <tool_call", {}}});
}

TEST(ToolCallFormats, Llama3Json) {
  expect_cases(
      ToolCallFormat::kLlama3Json,
      {{"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
        "",
        {{"get_weather", "{\"city\": \"Paris\"}"}}},
       {"{\"type\": \"function\", \"name\": \"f\", \"arguments\": {}}; {\"name\": \"g\", \"parameters\": [1, 2]}",
        "",
        {{"f", "{}"}, {"g", "[1, 2]"}}},
       {"{\"parameters\": {\"x\": 1}, \"name\": \"late\"}", "", {{"late", "{\"x\": 1}"}}},
       {"<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": \"b\"}}", "", {{"f", "{\"a\": \"b\"}"}}},
       {"Searching.<|python_tag|>brave_search.call(query=\"weather \\\"Paris\\\"\", n=3, safe=True)",
        "Searching.",
        {{"brave_search", R"({"query": "weather \"Paris\"", "n": 3, "safe": true})"}}},
       {"The answer is {\"a\": 1}.", "The answer is {\"a\": 1}.", {}},
       {"{\"result\": 42}", "{\"result\": 42}", {}},
       {"{\"name\": \"f\", \"parame", "{\"name\": \"f\", \"parame", {}},
       {"{\"name\": \"f\", \"parameters\": {\"a\": [1,", "", {{"f", "{\"a\": [1,"}}},
       {"<|python_tag|>print(1)", "<|python_tag|>print(1)", {}}});
}

TEST(ToolCallFormats, Mistral) {
  expect_cases(ToolCallFormat::kMistral,
               {{"[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}]", "", {{"f", "{\"a\": 1}"}}},
                {"Sure. [TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}, \"id\": \"abc123XYZ\"}, {\"name\": \"g\", "
                 "\"arguments\": {\"s\": \"]\"}}]",
                 "Sure.",
                 {{"f", "{}"}, {"g", "{\"s\": \"]\"}"}}},
                {"[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{}",
                 "",
                 {{"get_weather", "{\"city\": \"Paris\"}"}, {"get_time", "{}"}}},
                {"[TOOL_CALLS]f[CALL_ID]a1b2c3d4e[ARGS]{\"x\": [1]}", "", {{"f", "{\"x\": [1]}"}}},
                {"[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]\n\nDone.", "Done.", {{"f", "{}"}}},
                {"[TOOL_CALLS]oops no call", "[TOOL_CALLS]oops no call", {}},
                {"[TOOL_CALLS]f[ARGS]oops", "[TOOL_CALLS]f[ARGS]oops", {}},
                {"[TOOL_CALLS][{\"name\": \"f\", \"argu", "[TOOL_CALLS][{\"name\": \"f\", \"argu", {}},
                {"[TOOL_CALLS]f[ARGS]{\"a\": \"tru", "", {{"f", "{\"a\": \"tru"}}}});
}

TEST(ToolCallFormats, DeepSeekV3) {
  const std::string v3 =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": "
      "\"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  const std::string v31 =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜>"
      "<｜tool▁calls▁end｜>";
  expect_cases(ToolCallFormat::kDeepSeekV3,
               {{v3, "", {{"get_weather", "{\"city\": \"Paris\"}"}, {"get_time", "{}"}}},
                {"I will check.\n\n" + v31 + "\nok", "I will check.ok", {{"get_weather", "{\"city\": \"Paris\"}"}}},
                {"<｜tool▁calls▁begin｜>nonsense", "<｜tool▁calls▁begin｜>nonsense", {}},
                {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": ",
                 "",
                 {{"f", "{\"a\":"}}}});
}

TEST(ToolCallFormats, GptOss) {
  expect_cases(
      ToolCallFormat::kGptOss,
      {{"<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
        "",
        {{"get_weather", "{\"city\": \"Paris\"}"}},
        "Need weather."},
       {"<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>It is 4.<|return|>",
        "It is 4.",
        {},
        "Easy."},
       {"<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>", "", {{"f", "{}"}}},
       {"plain answer", "plain answer", {}},
       {"<|channel|>commentary<|message|>Let me check both.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.a <|constrain|>json<|message|>{}<|call|><|start|>assistant<|channel|>commentary "
        "to=functions.b<|message|> {\"x\": 1} <|call|>",
        "Let me check both.",
        {{"a", "{}"}, {"b", "{\"x\": 1}"}}},
       {"<|channel|>analysis<|message|>thinking <|ch", "", {}, "thinking <|ch"},
       {"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1", "", {{"f", "{\"a\": 1"}}}});
}

TEST(ToolCallFormats, CommandR) {
  expect_cases(
      ToolCallFormat::kCommandR,
      {{"Action: ```json\n[{\"tool_name\": \"f\", \"parameters\": {\"a\": 1}}, {\"tool_name\": \"g\", \"parameters\": "
        "{}}]\n```",
        "",
        {{"f", "{\"a\": 1}"}, {"g", "{}"}}},
       {"Plan: look it up.\nAction: ```json\n[{\"tool_name\": \"f\", \"parameters\": {}}]\n```\nDone",
        "Plan: look it up.Done",
        {{"f", "{}"}}},
       {"<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"f\", \"parameters\": {}}]<|END_ACTION|>",
        "",
        {{"f", "{}"}}},
       {"Action: maybe later", "Action: maybe later", {}}});
}

TEST(ToolCallFormats, Granite) {
  expect_cases(ToolCallFormat::kGranite,
               {{"<|tool_call|>[{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {}}]",
                 "",
                 {{"f", "{\"a\": 1}"}, {"g", "{}"}}},
                {"Checking. <|tool_call|>[{\"arguments\": {}, \"name\": \"g\"}]", "Checking.", {{"g", "{}"}}},
                {"<|tool_call|>{\"name\": \"f\"}", "<|tool_call|>{\"name\": \"f\"}", {}}});
}

TEST(ToolCallFormats, Functionary) {
  expect_cases(
      ToolCallFormat::kFunctionary,
      {{"<function=get_weather>{\"city\": \"Paris\"}</function>", "", {{"get_weather", "{\"city\": \"Paris\"}"}}},
       {"Sure.<function=f>{}</function><function=g>{\"a\": [1]}</function>",
        "Sure.",
        {{"f", "{}"}, {"g", "{\"a\": [1]}"}}},
       {">>>all\nLet me check.>>>get_weather\n{\"city\": \"Paris\"}",
        "Let me check.",
        {{"get_weather", "{\"city\": \"Paris\"}"}}},
       {"get_time\n{}>>>f\n{\"x\": 1}", "", {{"get_time", "{}"}, {"f", "{\"x\": 1}"}}},
       {"all\nHello there", "Hello there", {}},
       {"Hello\nworld", "Hello\nworld", {}},
       {"a >>> b", "a >>> b", {}}});
}

TEST(ToolCallFormats, DetectFromTemplate) {
  struct T {
    std::string source;
    ToolCallFormat want;
  };
  const std::vector<T> cases = {
      {"{{- '<tool_call>\\n' }}{{ tool_call | tojson }}", ToolCallFormat::kHermes},
      {"<tool_call>\n<function={{ name }}>\n<parameter={{ k }}>", ToolCallFormat::kQwen3Coder},
      {"<|start_header_id|>ipython<|end_header_id|> <|python_tag|>", ToolCallFormat::kLlama3Json},
      {"{{ '[TOOL_CALLS]' }}", ToolCallFormat::kMistral},
      {"{{'<｜tool▁calls▁begin｜>'}}", ToolCallFormat::kDeepSeekV3},
      {"<|start|>assistant<|channel|>final<|message|>", ToolCallFormat::kGptOss},
      {"<|START_OF_TURN_TOKEN|> Action: ```json", ToolCallFormat::kCommandR},
      {"<|tool_call|>", ToolCallFormat::kGranite},
      {">>>all\n{{ content }}", ToolCallFormat::kFunctionary},
      {"{{ messages }}", ToolCallFormat::kHermes},
  };
  for (const T& c : cases) {
    EXPECT_EQ(detect_tool_call_format(c.source), c.want) << c.source;
  }
  EXPECT_EQ(tool_call_format_name(ToolCallFormat::kDeepSeekV3), "deepseek_v3");
  EXPECT_EQ(tool_call_format_name(ToolCallFormat::kGptOss), "gpt_oss");
}

// Random outputs built from the formats' markers and JSON fragments: no
// crash, and every split agrees with the whole parse.
TEST(ToolCallFormats, RandomOutputsStreamLikeTheWhole) {
  const std::vector<std::string> fragments = {"<tool_call>",
                                              "</tool_call>",
                                              "<function=f>",
                                              "</function>",
                                              "<parameter=p>",
                                              "</parameter>",
                                              "{\"name\": \"f\"",
                                              ", \"arguments\": ",
                                              ", \"parameters\": ",
                                              "{",
                                              "}",
                                              "[",
                                              "]",
                                              "\"",
                                              "\\",
                                              ",",
                                              ";",
                                              " ",
                                              "\n",
                                              "x",
                                              "12",
                                              "true",
                                              "[TOOL_CALLS]",
                                              "[ARGS]",
                                              "<|python_tag|>",
                                              "g.call(a=1)",
                                              "<｜tool▁calls▁begin｜>",
                                              "<｜tool▁call▁begin｜>",
                                              "function<｜tool▁sep｜>f\n```json\n",
                                              "```",
                                              "<｜tool▁call▁end｜>",
                                              "<|channel|>",
                                              "analysis",
                                              "commentary to=functions.f",
                                              "<|message|>",
                                              "<|end|>",
                                              "<|call|>",
                                              "<|start|>",
                                              "Action: ```json\n",
                                              "{\"tool_name\": \"t\"",
                                              "<|tool_call|>",
                                              ">>>",
                                              "all\n",
                                              "f\n"};
  std::mt19937 rng(7);
  for (int i = 0; i < 9; ++i) {
    const auto format = static_cast<ToolCallFormat>(i);
    for (int round = 0; round < 100; ++round) {
      std::string text;
      const int n = std::uniform_int_distribution<int>(1, 24)(rng);
      for (int k = 0; k < n; ++k)
        text += fragments[std::uniform_int_distribution<size_t>(0, fragments.size() - 1)(rng)];
      SCOPED_TRACE(std::string(tool_call_format_name(format)) + ": " + text);
      expect_same_every_split(text, format);
    }
  }
}

}  // namespace
}  // namespace tokenmill::server
