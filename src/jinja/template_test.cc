// Errors (kind, line, column) and the sandbox's Limits: every hostile
// template must fail quickly with the right ErrorKind, never hang or crash.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "jinja/template.h"

namespace tokenmill::jinja {
namespace {

const nlohmann::ordered_json kEmpty = nlohmann::ordered_json::object();

std::string render(const std::string& source, const nlohmann::ordered_json& context = kEmpty,
                   const Limits& limits = {}) {
  return Template::parse(source).render(context, limits);
}

// Renders and returns the error; fails the test when nothing is thrown.
TemplateError error_of(const std::string& source, const Limits& limits = {}) {
  try {
    render(source, kEmpty, limits);
  } catch (const TemplateError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for: " << source;
  return TemplateError(ErrorKind::kRender, 0, 0, "");
}

TEST(JinjaErrors, SyntaxErrorsNameLineAndColumn) {
  const TemplateError e = error_of("line one\n{% if x %}\nno end");
  EXPECT_EQ(e.kind(), ErrorKind::kSyntax);
  EXPECT_EQ(e.line(), 3);
  const TemplateError bad = error_of("ok\n  {{ 1 + }}");
  EXPECT_EQ(bad.kind(), ErrorKind::kSyntax);
  EXPECT_EQ(bad.line(), 2);
  EXPECT_EQ(bad.column(), 10);  // the "}}" where an operand should be
  EXPECT_EQ(std::string(bad.what()).rfind("chat template line 2, column 10: ", 0), 0u) << bad.what();
  EXPECT_EQ(error_of("{% frobnicate %}").kind(), ErrorKind::kSyntax);
  EXPECT_EQ(error_of("{{ 'unterminated }}").kind(), ErrorKind::kSyntax);
  EXPECT_EQ(error_of("{# never closed").kind(), ErrorKind::kSyntax);
  EXPECT_EQ(error_of("{% for x in y %}{% endif %}").kind(), ErrorKind::kSyntax);
}

TEST(JinjaErrors, IncludeExtendsImportAreRefused) {
  for (const char* source :
       {"{% include 'a' %}", "{% extends 'a' %}", "{% import 'a' as b %}", "{% from 'a' import b %}"}) {
    EXPECT_EQ(error_of(source).kind(), ErrorKind::kSyntax) << source;
  }
}

TEST(JinjaErrors, RaiseExceptionCarriesTheMessage) {
  const TemplateError e = error_of("a\n{{ raise_exception('Only user and assistant roles are supported!') }}");
  EXPECT_EQ(e.kind(), ErrorKind::kRaised);
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.detail(), "Only user and assistant roles are supported!");
}

TEST(JinjaErrors, RuntimeErrorsAreRenderErrors) {
  EXPECT_EQ(error_of("{{ 'a' + 1 }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(error_of("{{ missing.attr }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(error_of("{{ 1 / 0 }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(error_of("{{ none() }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(error_of("{{ [1]|nosuchfilter }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(error_of("{{ 1 is nosuchtest }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(error_of("{{ '{99999999999999999999999}'.format(1) }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(error_of("{{ [1]|map(attribute='99999999999999999999999')|list }}").kind(), ErrorKind::kRender);
  const TemplateError e = error_of("x\n\n   {{ y.z }}");
  EXPECT_EQ(e.line(), 3);
}

TEST(JinjaErrors, ErrorsWhereJinja2Errs) {
  // Each of these fails in jinja2 as well (checked with the oracle).
  EXPECT_EQ(error_of("{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, b=2) }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(error_of("{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, 2) }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(error_of("{{ [1, 2]|map('string')|tojson }}").kind(), ErrorKind::kRender);  // a generator
  EXPECT_EQ(error_of("{{ [1, 2]|select|length }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(error_of("{{ x|tojson }}").kind(), ErrorKind::kRender);  // Undefined is not JSON
  EXPECT_EQ(error_of("{{ '%s %s' % ('a',) }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(error_of("{{ 3|last }}").kind(), ErrorKind::kRender);  // 'int' object is not iterable
  EXPECT_EQ(error_of("{{ false|indent(2) }}").kind(), ErrorKind::kRender);
}

TEST(JinjaSandbox, MutatingMethodsAreUnsafe) {
  // jinja2's ImmutableSandboxedEnvironment refuses these with a SecurityError.
  EXPECT_EQ(error_of("{% set x = [] %}{{ x.append(1) }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(error_of("{% set d = {} %}{{ d.update({'a': 1}) }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(error_of("{% set x = [1] %}{{ x.pop() }}").kind(), ErrorKind::kRender);
}

TEST(JinjaSandbox, PythonInternalsAreUnreachable) {
  EXPECT_EQ(error_of("{{ ''.__class__.__mro__ }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(error_of("{{ range.__globals__ }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(error_of("{{ ''['__class__'] }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(render("{{ ''.mro is defined }}"), "False");
  EXPECT_EQ(error_of("{{ ''.mro() }}").kind(), ErrorKind::kRender);
}

TEST(JinjaLimits, EndlessLoopHitsTheStepLimit) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of("{% for i in range(100000000) %}{{ i }}{% endfor %}").kind(), ErrorKind::kLimit);
  Limits few;
  few.max_steps = 10'000;
  EXPECT_EQ(error_of("{% for i in range(100000) %}{% endfor %}", few).kind(), ErrorKind::kLimit);
  EXPECT_EQ(error_of("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", few).kind(),
            ErrorKind::kLimit);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

// Sequences made at once (range, a string's characters, a split, |list)
// count against the container bound before they are built, so a template
// cannot take gigabytes for a moment.
TEST(JinjaLimits, MaterialisedSequencesAreBounded) {
  Limits small;
  small.max_output_bytes = 64 * 1024;
  for (const char* t : {"{% for i in range(100000) %}{% endfor %}", "{{ ('ab' * 30000) | list | length }}",
                        "{{ ('a ' * 30000).split() | length }}", "{% for c in 'x' * 60000 %}{% endfor %}"})
    EXPECT_EQ(error_of(t, small).kind(), ErrorKind::kLimit) << t;
  EXPECT_EQ(render("{{ range(100) | length }} {{ ('a b' * 10).split() | length }}", kEmpty, small), "100 11");
}

TEST(JinjaLimits, RecursiveMacroHitsTheDepthLimit) {
  const TemplateError e = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(e.kind(), ErrorKind::kLimit);
  Limits shallow;
  shallow.max_depth = 5;
  EXPECT_EQ(render("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{% endif %}x{% endmacro %}{{ f(3) }}", kEmpty, shallow),
            "xxxx");
  EXPECT_EQ(error_of("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(10) }}", shallow).kind(),
            ErrorKind::kLimit);
}

TEST(JinjaLimits, DoublingStringHitsTheSizeLimit) {
  const char* source =
      "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}";
  EXPECT_EQ(error_of(source).kind(), ErrorKind::kLimit);
  EXPECT_EQ(error_of("{{ 'x' * 100000000 }}").kind(), ErrorKind::kLimit);
  EXPECT_EQ(error_of("{{ ('x' * 1000000)|replace('x', 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy') }}").kind(),
            ErrorKind::kLimit);
  // Small in memory (one string, many references), huge as text: printing is bounded too.
  const std::string big = "{% set big = 'x' * 1000000 %}{% set many = [big] * 40 %}";
  EXPECT_EQ(error_of(big + "{{ many }}").kind(), ErrorKind::kLimit);
  EXPECT_EQ(error_of(big + "{{ many|tojson }}").kind(), ErrorKind::kLimit);
  EXPECT_EQ(error_of(big + "{{ many|tojson(indent=1000) }}").kind(), ErrorKind::kLimit);
  EXPECT_EQ(error_of(big + "{% set s = many ~ '' %}").kind(), ErrorKind::kLimit);
  EXPECT_EQ(error_of(big + "{{ many|join }}").kind(), ErrorKind::kLimit);
  // And holding copies of a string is bounded, whether built at once or in a loop.
  EXPECT_EQ(error_of("{% set big = 'x' * 1000000 %}{% set l = [big] * 100000 %}").kind(), ErrorKind::kLimit);
  EXPECT_EQ(error_of("{% set ns = namespace(l=[]) %}{% set big = 'x' * 10000000 %}"
                     "{% for i in range(100000) %}{% set ns.l = ns.l + [big] %}{% endfor %}")
                .kind(),
            ErrorKind::kLimit);
  // Replacing a namespace attribute does not count the old value.
  EXPECT_EQ(render("{% set ns = namespace(s='') %}{% for i in range(100) %}{% set ns.s = 'y' * 1000000 %}{% endfor %}"
                   "{{ ns.s|length }}"),
            "1000000");
  Limits small;
  small.max_output_bytes = 10;
  EXPECT_EQ(error_of("{% for i in range(20) %}ab{% endfor %}", small).kind(), ErrorKind::kLimit);
  EXPECT_EQ(render("{% for i in range(5) %}ab{% endfor %}", kEmpty, small), "ababababab");
}

TEST(JinjaLimits, DeepNestingIsASyntaxErrorNotACrash) {
  const std::string parens = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_EQ(error_of(parens).kind(), ErrorKind::kSyntax);
  const std::string lists = "{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}";
  EXPECT_EQ(error_of(lists).kind(), ErrorKind::kSyntax);
  std::string ifs;
  for (int n = 0; n < 10000; ++n) ifs += "{% if true %}";
  EXPECT_EQ(error_of(ifs).kind(), ErrorKind::kSyntax);
  std::string nots = "{{ ";
  for (int n = 0; n < 100000; ++n) nots += "not ";
  EXPECT_EQ(error_of(nots + "1 }}").kind(), ErrorKind::kSyntax);
  EXPECT_EQ(render("{{ ((((1)))) }}"), "1");
}

TEST(JinjaLimits, NestedValuesHitTheDepthLimit) {
  const char* wrap =
      "{% set ns = namespace(x=none) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}";
  EXPECT_EQ(error_of(wrap).kind(), ErrorKind::kLimit);
  const char* dicts =
      "{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = {'k': ns.x} %}{% endfor %}";
  EXPECT_EQ(error_of(dicts).kind(), ErrorKind::kLimit);
  const char* batches =
      "{% set ns = namespace(x=[1]) %}{% for i in range(100000) %}{% set ns.x = ns.x|batch(1)|list %}{% endfor %}";
  EXPECT_EQ(error_of(batches).kind(), ErrorKind::kLimit);
  // A namespace holding itself prints as an error, not a stack overflow (and does not leak).
  EXPECT_EQ(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").kind(), ErrorKind::kRender);
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me is defined }}"), "True");
}

TEST(JinjaLimits, WallTimeIsChecked) {
  Limits quick;
  quick.max_seconds = 1e-9;
  EXPECT_EQ(error_of("{% for i in range(1000000) %}{% endfor %}", quick).kind(), ErrorKind::kLimit);
}

TEST(JinjaTemplate, OneTemplateRendersOnManyThreads) {
  const Template t = Template::parse(
      "{% set ns = namespace(n=0) %}{% macro m(x) %}<{{ x|upper }}>{% endmacro %}"
      "{% for msg in messages %}{% set ns.n = ns.n + 1 %}{{ m(msg.role) }}{{ msg.content|tojson }}"
      "{{ loop.cycle('a', 'b') }}{% endfor %}{{ ns.n }}{{ messages|map(attribute='role')|join(',') }}");
  nlohmann::ordered_json context;
  context["messages"] = nlohmann::ordered_json::array();
  for (int n = 0; n < 10; ++n) context["messages"].push_back({{"role", n % 2 ? "assistant" : "user"}, {"content", n}});
  const std::string expected = t.render(context);
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int n = 0; n < 200; ++n) mismatches[static_cast<size_t>(k)] += t.render(context) != expected;
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
  EXPECT_EQ(expected.substr(0, 11), "<USER>0a<AS");
}

TEST(JinjaTemplate, PlainJinja2WhitespaceWithoutTrimAndLstrip) {
  // Expectations from jinja2.Environment() (trim_blocks and lstrip_blocks off).
  ParseOptions plain;
  plain.trim_blocks = false;
  plain.lstrip_blocks = false;
  EXPECT_EQ(Template::parse("  {% if true %}\nx\n  {% endif %}\ny\n", plain).render(kEmpty), "  \nx\n  \ny");
  EXPECT_EQ(Template::parse("a  {%- if true -%}  b  {%+ endif %}\n", plain).render(kEmpty), "ab  ");
}

TEST(JinjaTemplate, MentionsFindsWholeNames) {
  const Template t = Template::parse("{% if tools %}{{ enable_thinking_x }}{% endif %}");
  EXPECT_TRUE(t.mentions("tools"));
  EXPECT_FALSE(t.mentions("enable_thinking"));
  EXPECT_EQ(t.source(), "{% if tools %}{{ enable_thinking_x }}{% endif %}");
}

TEST(JinjaTemplate, TrailingNewlineIsDroppedOnce) {
  EXPECT_EQ(render("a\n"), "a");
  EXPECT_EQ(render("a\n\n"), "a\n");
  // As jinja2 (checked with the oracle): \r\n and \r become \n before lexing.
  EXPECT_EQ(render("a\r\nb  {%- if true %}\r\nx\r\n{% endif %}\r\n"), "a\nbx\n");
  EXPECT_EQ(render("a\rb\r\n"), "a\nb");
  ParseOptions keep;
  keep.keep_trailing_newline = true;
  EXPECT_EQ(Template::parse("a\n", keep).render(kEmpty), "a\n");
}

}  // namespace
}  // namespace tokenmill::jinja
