// Feature cases whose expected text is what Python's jinja2 3.1.6 renders
// with Hugging Face's settings (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loopcontrols, the generation tag, json.dumps tojson), over
// the context below. The expectations were produced by running each
// template through jinja2, not written by hand.
#include <gtest/gtest.h>

#include "jinja/template.h"

namespace tokenmill::jinja {
namespace {

const char* const kContext = R"json(
{"messages": [{"role": "system", "content": "Be nice."}, {"role": "user", "content": "Hi ünïcode 'q' \"d\""}, {"role": "assistant", "content": "Hello!", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1, "b": [1.5, true, null]}}}]}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}], "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "n": 3, "f": 2.5, "s": "Hello World"}
)json";

struct OracleCase {
  const char* source;
  const char* expected;
};

const OracleCase kCases[] = {
    {"{% set c = 0 %}{% for i in range(3) %}{% set c = c + 1 %}{{c}}{% endfor %}{{c}}", "1110"},
    {"a  {# x #}\nb", "a  b"},
    {"  {# x #}\nb", "b"},
    {"  {% if 1 %}\nx{% endif %}", "x"},
    {"{{ [1,'a',none,true,1.5,{'k':'v'}] }}{{ (1,2) }}{{ 1e20 }}{{ 1e16 }}{{ 1e15 }}{{ 0.0001 }}{{ 0.00001 }}",
     "[1, 'a', None, True, 1.5, {'k': 'v'}](1, 2)1e+201e+161000000000000000.00.00011e-05"},
    {"{{ \"it's\" }}{{ [\"it's\", 'a\"b', \"x\\ny\"] }}", "it's[\"it's\", 'a\"b', 'x\\ny']"},
    {"{% for i in [1,2] %}{% set y = i %}{% endfor %}{{ y }}", ""},
    {"{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 4 / 2 }}",
     "3 -4 2 3.5 1024 0.5 2.0"},
    {"{{ 'abc'[::-1] }}{{ 'h\xc3"
     "\xa9"
     "llo'[1:3] }}",
     "cba\xc3"
     "\xa9"
     "l"},
    {"a\n{%- if true %} b {% endif -%}\n c", "a b c"},
    {"{% for m in messages %}<|{{ m.role }}|>{{ m['content'] }}{% if not loop.last %}\n{% endif %}{% endfor %}",
     "<|system|>Be nice.<|user|>Hi \xc3"
     "\xbc"
     "n\xc3"
     "\xaf"
     "code 'q' \"d\"<|assistant|>Hello!"},
    {"{{ messages|tojson }}|{{ tools|tojson(indent=2) }}|{{ messages[2].tool_calls[0].function.arguments|tojson }}",
     "[{\"role\": \"system\", \"content\": \"Be nice.\"}, {\"role\": \"user\", \"content\": \"Hi \xc3"
     "\xbc"
     "n\xc3"
     "\xaf"
     "code 'q' \\\"d\\\"\"}, {\"role\": \"assistant\", \"content\": \"Hello!\", \"tool_calls\": [{\"function\": "
     "{\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": [1.5, true, null]}}}]}]|[\n  {\n    \"type\": \"function\",\n "
     "   \"function\": {\n      \"name\": \"f\",\n      \"parameters\": {\n        \"type\": \"object\",\n        "
     "\"properties\": {\n          \"a\": {\n            \"type\": \"integer\"\n          }\n        }\n      }\n    "
     "}\n  }\n]|{\"a\": 1, \"b\": [1.5, true, null]}"},
    {"{% for k, v in messages[0].items() %}{{k}}={{v}};{% endfor %}{{ messages|length }}{{ "
     "messages|map(attribute='role')|join(',') }}",
     "role=system;content=Be nice.;3system,user,assistant"},
    {"{% set ns = namespace(found=false) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% "
     "endif %}{% endfor %}{{ ns.found }}",
     "True"},
    {"{% macro f(a, b=2) %}[{{a}}{{b}}]{% endmacro %}{{ f(1) }}{{ f(1, b=5) }}{{ f(a=3) }}", "[12][15][32]"},
    {"{{ s.split(' ') }}{{ s.lower() }}{{ s.upper() }}{{ s.replace('l', 'L', 2) }}{{ s.startswith('He') }}{{ "
     "s.endswith(('x','ld')) }}{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}",
     "['Hello', 'World']hello worldHELLO WORLDHeLLo WorldTrueTruea b|a"},
    {"{{ messages|selectattr('role', 'equalto', 'user')|list|length }}{{ messages|rejectattr('role', 'eq', "
     "'user')|map(attribute='role')|list }}",
     "1['system', 'assistant']"},
    {"{{ x|default('d') }}{{ ''|default('e', true) }}{{ none is none }}{{ 3 is odd }}{{ 4 is divisibleby 2 }}{{ x is "
     "defined }}{{ s is string }}",
     "deTrueTrueTrueFalseTrue"},
    {"{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% "
     "endfor %}",
     "02"},
    {"{{ \"a\\nb\\nc\"|indent(2) }}|{{ \"a\\n\\nb\\n\"|indent(2, true) }}|{{ \"a\\n\\nb\"|indent(2, blank=true) }}",
     "a\n  b\n  c|  a\n\n  b\n|a\n  \n  b"},
    {"{% filter upper %}hello {{ s }}{% endfilter %}", "HELLO HELLO WORLD"},
    {"{% set x %}  block {{ n }} {% endset %}[{{ x }}]", "[  block 3 ]"},
    {"{{ 1 if false }}|{{ 'a' ~ 1 ~ none }}|{{ [1,2,3][1:] }}|{{ [3,1,2]|sort }}|{{ [1,2,2,3]|unique|list }}|{{ "
     "{'b':1,'a':2}|dictsort }}",
     "|a1None|[2, 3]|[1, 2, 3]|[1, 2, 3]|[('a', 2), ('b', 1)]"},
    {"{{ f|round }}{{ 2.567|round(2) }}{{ -3|abs }}{{ '42'|int + 1 }}{{ '3.5'|float }}{{ [1,2,3]|sum }}{{ [1,5,3]|max "
     "}}{{ [4,2,8]|min }}",
     "2.02.573433.5652"},
    {"{% for m in messages if m.role != 'system' %}{{ loop.index }}/{{ loop.length }}:{{ m.role }} {% endfor %}",
     "1/2:user 2/2:assistant "},
    {"{% raw %}{{ not parsed }}{% endraw %}", "{{ not parsed }}"},
    {"{%- for x in [1,2] -%}\n    {{ x }}\n{%- endfor %}", "12"},
    {"{{ loop_var is undefined }}{{ messages[0] is mapping }}{{ [1] is iterable }}{{ true is boolean }}{{ 1 is integer "
     "}}{{ 1.0 is float }}{{ 1 is number }}",
     "TrueTrueTrueTrueTrueTrueTrue"},
    {"{{ \"{} and {}\".format(1, 'x') }}{{ 'ab'*3 }}{{ [1]*2 }}{{ 'x' in 'xyz' }}{{ 2 not in [1] }}{{ 'role' in "
     "messages[0] }}",
     "1 and xababab[1, 1]TrueTrueTrue"},
    {"  {%+ if true %}x{% endif %}", "  x"},
    {"a\n  {%- if true -%}\n  b\n  {%- endif %}\nc", "abc"},
    {"  {{ 'x' }}\n  {# comment #}\n  y {% if true %}z{% endif %}", "  x\n  y z"},
    {"{% if true %}\n  a\n{% else %}\n  b\n{% endif %}\ndone", "  a\ndone"},
    {"{%- set x = 1 -%}\n{{- x -}}\n   tail", "1tail"},
    {"{% for m in messages %}\n{% if m.role == 'user' %}\nU: {{ m.content }}\n{% elif m.role == 'assistant' %}\nA: {{ "
     "m.content }}\n{% else %}\nS: {{ m.content }}\n{% endif %}\n{% endfor %}",
     "S: Be nice.\nU: Hi \xc3"
     "\xbc"
     "n\xc3"
     "\xaf"
     "code 'q' \"d\"\nA: Hello!\n"},
    {"{{ messages[0].missing }}|{{ messages[5] }}|{{ messages[-1].role }}", "||assistant"},
    {"{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n-1) }}{% endif %}{% endmacro %}{{ rec(5) }}", "54321"},
    {"{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}inner {{ n }}{% endcall %}", "<inner 3>"},
    {"{{ 'abc'.title() }} {{ 'hello world'|title }} {{ \"it's a-b\"|title }} {{ \"it's\"|capitalize }}",
     "Abc Hello World It's A-B It's"},
    {"{{ \"a,b,,c\".split(',') }}{{ \"a b  c \".split() }}{{ \"a,b,c\".split(',', 1) }}{{ \"a,b,c\".rsplit(',', 1) }}",
     "['a', 'b', '', 'c']['a', 'b', 'c']['a', 'b,c']['a,b', 'c']"},
    {"{{ \"x\\ny\\r\\nz\".splitlines() }}{{ '5'.zfill(3) }}{{ 'abc'.find('c') }}{{ 'ab'.count('a') }}{{ '1'.isdigit() "
     "}}",
     "['x', 'y', 'z']00521True"},
    {"{{ {'a': 1, 'b': {'c': [1, 2]}}|tojson(indent=4) }}",
     "{\n    \"a\": 1,\n    \"b\": {\n        \"c\": [\n            1,\n            2\n        ]\n    }\n}"},
    {"{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}{{ [1,2]|tojson(separators=(',', ':')) }}{{ \"\xc3"
     "\xa9"
     "\\\"\\\\\\n\\t\\u0001\"|tojson }}",
     "{\"a\": 2, \"b\": 1}[1,2]\"\xc3"
     "\xa9"
     "\\\"\\\\\\n\\t\\u0001\""},
    {"{{ 3.0 }} {{ 1/3 }} {{ 2.5e-5 }} {{ 100.0 }} {{ 1e100 }} {{ -0.0 }} {{ 12345678901234567.0 }}",
     "3.0 0.3333333333333333 2.5e-05 100.0 1e+100 -0.0 1.2345678901234568e+16"},
    {"{{ messages|first }}{{ (messages|last).role }}{{ [1,2,3]|reverse|list }}{{ 'abc'|reverse }}{{ 'abc'|list }}",
     "{'role': 'system', 'content': 'Be nice.'}assistant[3, 2, 1]cba['a', 'b', 'c']"},
    {"{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set t = (1,) %}{{ t }}", "12(1,)"},
    {"{{ messages[0].get('role') }}{{ messages[0].get('nope', 'dflt') }}{{ messages[0].get('nope') }}{{ "
     "messages[0].keys()|list }}",
     "systemdfltNone['role', 'content']"},
    {"{% for a in [[1,2],[3,4]] %}{% for b in a %}{{ loop.index }}{{ b }}{% endfor %}{{ loop.index }};{% endfor %}",
     "11221;13242;"},
    {"{% for x in [] %}y{% else %}empty{% endfor %}", "empty"},
    {"{% for x in 'ab' %}{{ loop.cycle('odd', 'even') }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.revindex }}{{ "
     "loop.first }}{% endfor %}",
     "oddb2Trueevena1False"},
    {"{{ 1 == 1.0 }}{{ true == 1 }}{{ 'a' < 'b' }}{{ [1,2] < [1,3] }}{{ 1 < 2 < 3 }}{{ none == none }}",
     "TrueTrueTrueTrueTrueTrue"},
    {"{{ undefined_thing }}{{ undefined_thing|length }}{% for x in undefined_thing %}x{% endfor %}{{ undefined_thing "
     "is none }}",
     "0False"},
    {"{{ \"%s-%d\"|format('a', 3) }}{{ 10|string + 'x' }}{{ [1,'a']|join('-') }}{{ messages|map('tojson')|first }}",
     "a-310x1-a{\"role\": \"system\", \"content\": \"Be nice.\"}"},
    {"{{ {'a':1}.items()|list }}{{ {'a':1}|items|list }}{{ dict(a=1, b='x') }}",
     "[('a', 1)][('a', 1)]{'a': 1, 'b': 'x'}"},
    {"{{ [3,1,2]|sort(reverse=true) }}{{ ['b','A','c']|sort }}{{ "
     "messages|sort(attribute='role')|map(attribute='role')|join }}{{ ['B','a']|max }}",
     "[3, 2, 1]['A', 'b', 'c']assistantsystemuserB"},
    {"{{ messages|selectattr('tool_calls')|list|length }}{{ messages|selectattr('tool_calls', 'defined')|list|length "
     "}}{{ [1,2,3,4]|select('odd')|list }}{{ [0,1,'']|select|list }}",
     "11[1, 3][1]"},
    {"{{ \"  x  \"|trim }}|{{ \"xxhixx\"|trim('x') }}|{{ 'ab'|center(6) }}|{{ 'a b c'|wordcount }}|{{ '<a "
     "href=\"x\">'|e }}",
     "x|hi|  ab  |3|&lt;a href=&#34;x&#34;&gt;"},
    {"{% set x = [1,2,3] %}{{ x[-1] }}{{ x[::2] }}{{ x[5:] }}{{ x[-2:] }}{{ 'h\xc3"
     "\xa9"
     "llo'[-1] }}{{ 'h\xc3"
     "\xa9"
     "llo'[::-2] }}",
     "3[1, 3][][2, 3]oolh"},
    {"x {%- generation -%}  gen {{ n }}  {%- endgeneration %} y", "xgen 3 y"},
    {"  {#- c -#}  \n  a {#+ c #}\nb", "a b"},
    {"{# c #}\nafter", "after"},
    {"{{ -2 ** 2 }}{{ not 1 and 0 }}{{ not 'a' in 'abc' }}{{ 1 if 0 else 2 if 0 else 3 }}{{ 2 * 3 + 4 % 3 }}{{ 'a' ~ 2 "
     "* 3 }}",
     "4FalseFalse37a6"},
    {"{{ n is not none }}{{ n is not string }}{{ messages is defined and messages|length > 1 }}", "TrueTrueTrue"},
    {"{{ 1, 2 }}", "(1, 2)"},
    {"{% raw -%}\n   {{ x }}\n{%- endraw %}\nend", "{{ x }}end"},
    {"   {% raw %}x{% endraw %}", "x"},
    {"{% if messages[0]['role'] == 'system' %}{% set sys = messages[0]['content'] %}{% set msgs = messages[1:] %}{% "
     "else %}{% set msgs = messages %}{% endif %}{{ sys }}{{ msgs|length }}",
     "Be nice.2"},
    {"{{ \"\\u00e9\" }}{{ '\\x41' }}{{ 'a\\\\b' }}{{ \"tab\\there\" }}",
     "\xc3"
     "\xa9"
     "Aa\\btab\there"},
    {"{% for i in range(3) %}{{ i }}{% if loop.last %}!{% endif %}{% endfor %}{{ range(2, 10, 3)|list }}{{ range(5, 0, "
     "-2)|list }}",
     "012![2, 5, 8][5, 3, 1]"},
    {"{{ messages[2].tool_calls[0].function.arguments.items()|list }}", "[('a', 1), ('b', [1.5, True, None])]"},
    {"{{ s[0] }}{{ s.0 }}{{ messages.0.role }}", "HHsystem"},
    {"{{ true }}{{ True }}{{ none }}{{ None }}{{ [true, none] }}", "TrueTrueNoneNone[True, None]"},
    {"{%- if tools %}\n{{- '<tools>' }}\n{%- for tool in tools %}\n    {{- '\\n' + tool.function | tojson }}\n{%- "
     "endfor %}\n{{- '\\n</tools>' }}\n{%- endif %}",
     "<tools>\n{\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": "
     "\"integer\"}}}}\n</tools>"},
    {"{{ 1.5 // 1 }}{{ -1.5 % 1 }}{{ 7 % -3 }}{{ 2 ** 0.5 }}{{ 10 / 4 }}{{ 1 + 1.5 }}{{ true + true }}",
     "1.00.5-21.41421356237309512.52.52"},
    {"{{ messages|tojson(indent=2) }}",
     "[\n  {\n    \"role\": \"system\",\n    \"content\": \"Be nice.\"\n  },\n  {\n    \"role\": \"user\",\n    "
     "\"content\": \"Hi \xc3"
     "\xbc"
     "n\xc3"
     "\xaf"
     "code 'q' \\\"d\\\"\"\n  },\n  {\n    \"role\": \"assistant\",\n    \"content\": \"Hello!\",\n    \"tool_calls\": "
     "[\n      {\n        \"function\": {\n          \"name\": \"f\",\n          \"arguments\": {\n            \"a\": "
     "1,\n            \"b\": [\n              1.5,\n              true,\n              null\n            ]\n          "
     "}\n        }\n      }\n    ]\n  }\n]"},
    {"{{ 'a' * -1 }}|{{ [1, 2] + [3] }}|{{ (1, 2) + (3,) }}", "|[1, 2, 3]|(1, 2, 3)"},
    {"{% set d = {'x': 1, 'y': 2} %}{% for k in d %}{{ k }}{% endfor %}{% for k, v in d|dictsort %}{{ k }}{{ v }}{% "
     "endfor %}",
     "xyx1y2"},
    {"{{ '%s-%d' % ('a', 3) }}{{ '%s!' % 'x' }}{{ '%.2f' % 1.5 }}{{ '%5s|%-4d|%03d|%x' % ('ab', 7, 5, 255) }}{{ '%r' % "
     "'q' }}{{ \"%s\"|format([1]) }}",
     "a-3x!1.50   ab|7   |005|ff'q'[1]"},
    {"{{ messages[1].content[:5] }}{{ '\xc3"
     "\xa9"
     "'|upper }}{{ 'Hello'.center(11, '*') }}{{ '\xc3"
     "\x89"
     "COLE'|lower }}{{ '\xd0"
     "\x9f"
     "\xd1"
     "\x80"
     "\xd0"
     "\xb8"
     "\xd0"
     "\xb2"
     "\xd0"
     "\xb5"
     "\xd1"
     "\x82"
     "'|upper }}{{ '\xce"
     "\x91"
     "\xce"
     "\x92"
     "\xce"
     "\x93"
     "'.lower() }}",
     "Hi \xc3"
     "\xbc"
     "n\xc3"
     "\x89"
     "***Hello***\xc3"
     "\xa9"
     "cole\xd0"
     "\x9f"
     "\xd0"
     "\xa0"
     "\xd0"
     "\x98"
     "\xd0"
     "\x92"
     "\xd0"
     "\x95"
     "\xd0"
     "\xa2"
     "\xce"
     "\xb1"
     "\xce"
     "\xb2"
     "\xce"
     "\xb3"
     ""},
    {"{% macro f(a) %}{{ a }}{{ kwargs }}{% endmacro %}{{ f(1, b=2) }}", "1{'b': 2}"},
    {"{% macro f() %}{{ varargs }}{% endmacro %}{{ f(1, 2) }}", "(1, 2)"},
    {"{{ 0.1 + 0.2 }}{{ 1/7 }}{{ 2**62 }}{{ 1e-7 }}{{ 123456789.123 }}{{ 5e-324 }}{{ 1e999 }}",
     "0.300000000000000040.1428571428571428546116860184273879041e-07123456789.1235e-324inf"},
    {"{{ messages|groupby('role') }}{% for g, items in messages|groupby('role') %}{{ g }}={{ items|length }};{% endfor "
     "%}",
     "[('assistant', [{'role': 'assistant', 'content': 'Hello!', 'tool_calls': [{'function': {'name': 'f', "
     "'arguments': {'a': 1, 'b': [1.5, True, None]}}}]}]), ('system', [{'role': 'system', 'content': 'Be nice.'}]), "
     "('user', [{'role': 'user', 'content': 'Hi \xc3"
     "\xbc"
     "n\xc3"
     "\xaf"
     "code \\'q\\' \"d\"'}])]assistant=1;system=1;user=1;"},
    {"{{ ['b','A','a','B']|sort }}{{ ['b','A','a','B']|unique|list }}{{ ['\xc3"
     "\x89"
     "', 'e']|sort(case_sensitive=true) }}",
     "['A', 'a', 'b', 'B']['b', 'A']['e', '\xc3"
     "\x89"
     "']"},
    {"{{ 'a' 'b' }}{{ 'abc' ~ 1.0 }}{{ x.y if x is defined }}{% if x is not defined or x is none %}U{% endif %}",
     "ababc1.0U"},
    {"{{ tools|map(attribute='function.name')|join(', ') }}{{ {'b':1,'a':2}|dictsort(reverse=true) }}{{ "
     "range(3)|list|tojson }}{{ messages|length > 0 }}",
     "f[('b', 1), ('a', 2)][0, 1, 2]True"},
    {"{{ 1.5|int }}{{ 'abc'|int }}{{ true|int }}{{ {'a':1}|length }}{{ 3|float }}{{ none|string }}{{ 'abc'|first }}{{ "
     "[1,2,3]|join }}",
     "10113.0Nonea123"},
    {"{% for a in [1] %}{{ loop.depth }}{{ loop.depth0 }}{% endfor %}", "10"},
    {"{{ (messages|selectattr('role', 'equalto', 'system')|first).content }}{{ "
     "messages|rejectattr('role','in',['system','tool'])|list|length }}",
     "Be nice.2"},
    {"{{ messages[0] }}", "{'role': 'system', 'content': 'Be nice.'}"},
    {"{{ \"a\\tb\"|tojson }}{{ \"\\u2028\"|tojson }}{{ \"\\x7f\"|tojson }}{{ 1e300*1e10 }}",
     "\"a\\tb\"\"\xe2"
     "\x80"
     "\xa8"
     "\"\"\x7f"
     "\"inf"},
    {"{%- for m in messages -%}\n\t{%- if loop.first -%}\n\t\t[{{ m.role }}]\n\t{%- endif -%}\n{%- endfor %}",
     "[system]"},
    {"{% set x = namespace(a=[]) %}{% set x.a = x.a + [1] %}{{ x.a }}", "[1]"},
    {"{{ [1, [2, [3]]]|tojson(indent=1) }}{{ {}|tojson(indent=2) }}{{ [[]]|tojson(indent=2) }}",
     "[\n 1,\n [\n  2,\n  [\n   3\n  ]\n ]\n]{}[\n  []\n]"},
    {"{{ 'a,b'.split(',')|last }}{{ 'x'.join(['a','b']) }}{{ ', '.join(messages|map(attribute='role')) }}",
     "baxbsystem, user, assistant"},
    {"{{ message }}{% for message in messages %}{% endfor %}{{ message }}", ""},
    {"{% if true %}{% set top = 1 %}{% endif %}{{ top }}", "1"},
    {"{{ [1,2,3]|first }}{{ [none]|first is none }}{{ []|first is defined }}", "1TrueFalse"},
    {"{{ 'A'|lower is lower }}{{ 'abc' is upper }}{{ 5 is ge 3 }}{{ 5 is lt 3 }}{{ none is sameas none }}{{ 'x' is in "
     "['x'] }}",
     "TrueFalseTrueFalseTrueTrue"},
    {"{{ \"Hello {name}\".format(name='W') }}{{ '{0}{0}'.format('z') }}", "Hello Wzz"},
    {"{{ [1,2]|map('string')|join(',') }}{{ ([]|select) is true }}{% if []|select %}T{% endif %}{{ [1,2]|reverse|first "
     "}}{{ [3,1]|map('string')|sort }}",
     "1,2FalseT2['1', '3']"},
    {"{{ \"a'\"|safe + \"<b>\" }}|{{ \"<x>\" + \"y\"|safe }}|{{ (\"<\" ~ \"a\"|safe) }}|{{ \"<\"|e }}{{ \"<\"|e|e }}",
     "a'&lt;b&gt;|&lt;x&gt;y|<a|&lt;&lt;"},
    {"{{ {'a': 1}|items|list }}{% for k, v in {'a': 1}|items %}{{k}}{{v}}{% endfor %}", "[('a', 1)]a1"},
    {"{{ 0|round }}{{ 5|round(2) }}{{ 2.5|round }}{{ 3.5|round }}{{ 2.675|round(2) }}{{ 7|round(method='floor') }}{{ "
     "-2.5|round }}{{ 1.45|round(1, 'ceil') }}{{ 1e300|round(2) }}",
     "052.04.02.677.0-2.01.51e+300"},
    {"{{ none|selectattr('a')|list }}{{ ''|map('upper')|list }}{{ 0|reject|list }}", "[][][]"},
    {"{{ '\xc3"
     "\xa9"
     "a b\xc3"
     "\x89"
     "'.title() }}{{ '\xc3"
     "\xa9"
     "a b\xc3"
     "\x89"
     "'|title }}{{ '\xc3"
     "\xa9"
     "A'|capitalize }}{{ 'hello-world (x)'|title }}{{ \"it's\"|title }}{{ \"they're bill's friends.\"|title }}{{ "
     "\"ab1cd\"|title }}{{ 'ab1cd'.title() }}",
     "\xc3"
     "\x89"
     "a B\xc3"
     "\xa9"
     "\xc3"
     "\x89"
     "a B\xc3"
     "\xa9"
     "\xc3"
     "\x89"
     "aHello-World (X)It'sThey're Bill's Friends.Ab1cdAb1Cd"},
    {"{% macro mac(a, b=2) %}[{{ a }}{{ b }}{% if caller is defined %}{{ caller() }}{% endif %}]{% endmacro %}{% for m "
     "in messages %}{% call mac(loop.index) %}{{ m.role }}{{ loop.first }}{{ kwargs }}{% endcall %}{% endfor %}",
     "[12systemTrue{}][22userFalse{}][32assistantFalse{}]"},
    {"{% macro list_it(items) %}{% for it in items %}{{ caller(it) }}{% endfor %}{% endmacro %}{% set sep = ';' %}{% "
     "call(x) list_it([1, 2]) %}{{ x }}{{ sep }}{% endcall %}",
     "1;2;"},
    {"{{ (false)[::-1] }}{{ 2.0 is even }}{{ 3.5 is odd }}{{ 4.5 is divisibleby(1.5) }}{{ 7 is divisibleby 2 }}{{ -4 "
     "is even }}{{ -3 is odd }}{{ 3.0 is odd }}{{ -3.0 is odd }}",
     "TrueFalseTrueFalseTrueTrueTrueTrue"},
    {"{{ messages|tojson(ensure_ascii=true) }}{{ \"\xc3"
     "\xa9"
     "\xf0"
     "\x9f"
     "\x98"
     "\x80"
     "\\n\\u0001\"|tojson(true) }}{{ {'\xd0"
     "\xba"
     "\xd0"
     "\xbb"
     "\xd1"
     "\x8e"
     "\xd1"
     "\x87"
     "': 'x'}|tojson(ensure_ascii=true, sort_keys=true) }}",
     "[{\"role\": \"system\", \"content\": \"Be nice.\"}, {\"role\": \"user\", \"content\": \"Hi \\u00fcn\\u00efcode "
     "'q' \\\"d\\\"\"}, {\"role\": \"assistant\", \"content\": \"Hello!\", \"tool_calls\": [{\"function\": {\"name\": "
     "\"f\", \"arguments\": {\"a\": 1, \"b\": [1.5, true, "
     "null]}}}]}]\"\\u00e9\\ud83d\\ude00\\n\\u0001\"{\"\\u043a\\u043b\\u044e\\u0447\": \"x\"}"},
    {"{{ \"foo bar baz qux\"|truncate(9) }}|{{ \"foo bar baz qux\"|truncate(9, true) }}|{{ \"foo bar baz "
     "qux\"|truncate(11) }}|{{ \"foo bar baz qux\"|truncate(9, end=' >>', leeway=0) }}|{{ \"h\xc3"
     "\xa9"
     "llo w\xc3"
     "\xb6"
     "rld\"|truncate(8, leeway=0) }}|{{ \"abcdefghijkl\"|truncate(5, leeway=0) }}",
     "foo...|foo ba...|foo bar baz qux|foo >>|h\xc3"
     "\xa9"
     "llo...|ab..."},
    {"{{ ((1, 2)|reverse is not lower)|round }}{{ 1 is lower }}{{ true is upper }}{{ none is upper }}{{ 'aB' is lower "
     "}}{{ 'ab1' is lower }}{{ [1] is lower }}\n",
     "0FalseFalseFalseFalseTrueFalse"},

};

TEST(JinjaOracle, RendersLikeJinja2) {
  const auto context = nlohmann::ordered_json::parse(kContext);
  for (const OracleCase& c : kCases) {
    SCOPED_TRACE(c.source);
    EXPECT_EQ(Template::parse(c.source).render(context), c.expected);
  }
}

TEST(JinjaOracle, ParsedTemplateRendersRepeatedly) {
  const auto context = nlohmann::ordered_json::parse(kContext);
  const Template t = Template::parse("{% for m in messages %}{{ m.role }};{% endfor %}");
  for (int n = 0; n < 3; ++n) EXPECT_EQ(t.render(context), "system;user;assistant;");
}

}  // namespace
}  // namespace tokenmill::jinja
