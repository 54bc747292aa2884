"""Structured output and tool calling on `tokenmill serve` with the real
Gemma 3 270M, through the official openai client: every schema in
tests/data/schemas gives output that parses and validates (chat and
completions, sampled at temperature 1 with several seeds), json_object, the
regex / grammar / choice extensions, tools (required, named, auto, none;
whole and streamed; parallel_tool_calls false; n = 2; a multi-turn
conversation), and adversarial constraints that must work or be refused
with a 400 naming the field within a bounded time.

The model is a small base model: the constraints make its output valid,
not sensible, so only validity is asserted. Requests are sent concurrently
so that they batch (the engine runs constrained and free sequences in one
step)."""
import concurrent.futures
import glob
import json
import os
import re
import time

import openai
import pytest

from conftest import REPO, require_module
from test_server_common import Server

jsonschema = require_module("jsonschema", "jsonschema", "validating constrained output")

ENGINE = ["-t", "2", "--kv-memory", "256M", "--max-seqs", "32"]
SCHEMA_DIR = os.path.join(REPO, "tests", "data", "schemas")
SEEDS = (11, 12, 13)  # n = 3 samples from seed 11 use these
MAX_TOKENS = 300
# Parallel tool calls: a base model tends to call again and again; enough
# room for a few calls.
PARALLEL_MAX_TOKENS = 100
# Generous: compiling is bounded by 2 s server-side; the rest is queueing on
# a loaded 2-core machine.
REFUSAL_BOUND_S = 10.0

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.", "strict": True,
    "parameters": {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
                   "properties": {"city": {"type": "string", "maxLength": 20},
                                  "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Current time in a time zone.", "strict": True,
    "parameters": {"type": "object", "additionalProperties": False, "required": ["zone"],
                   "properties": {"zone": {"type": "string", "enum": ["UTC", "CET", "PST"]}}}}}
TOOLS = [WEATHER, TIME]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is the weather in Paris, and what time is it in UTC?"}]


@pytest.fixture(scope="module")
def server(tokenmill_bin, gemma_path):
    with Server(tokenmill_bin, gemma_path, *ENGINE, "--model-alias", "gemma") as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return server.client()


def load_schemas():
    paths = sorted(glob.glob(os.path.join(SCHEMA_DIR, "*.json")))
    out = []
    for p in paths:
        with open(p) as f:
            out.append((os.path.splitext(os.path.basename(p))[0], json.load(f)))
    return out


def run_all(calls, workers=24):
    """Runs the callables concurrently (so that their requests batch); returns their results in order."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        return [f.result() for f in [pool.submit(c) for c in calls]]


def validate(schema, text, where):
    try:
        value = json.loads(text)
    except ValueError as e:
        raise AssertionError(f"{where}: output is not JSON ({e}): {text!r}") from None
    # The schema's own draft's format checker (a bare FormatChecker() mixes
    # in draft 3's "time", which refuses RFC 3339 offsets and fractions).
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls(schema, format_checker=cls.FORMAT_CHECKER).validate(value)
    except jsonschema.ValidationError as e:
        raise AssertionError(f"{where}: output does not validate ({e.message}): {text!r}") from None
    return value


def expect_400(fn, param, needle=None, bound=REFUSAL_BOUND_S):
    """Calls fn expecting a 400 naming `param` within `bound` seconds; returns the message."""
    start = time.monotonic()
    with pytest.raises(openai.BadRequestError) as info:
        fn()
    elapsed = time.monotonic() - start
    assert elapsed < bound, f"the refusal took {elapsed:.1f} s"
    err = info.value.body
    assert err["param"] == param, err
    if needle:
        assert needle in err["message"], err
    return err["message"]


# --- (a) every schema file, on both endpoints -----------------------------


def test_schema_files_validate_on_chat_and_completions(client):
    """Every schema, on both endpoints, n = 3 samples (seeds 11, 12, 13) at
    temperature 1: every sample ends with "stop" and validates (the schemas
    bound their strings and arrays, so a sample cannot ramble into
    max_tokens; the recursive ones live in recursive/, where a base model
    can nest until max_tokens, and are checked by the C++ tests)."""
    schemas = load_schemas()
    assert len(schemas) >= 20, f"expected at least 20 schemas in {SCHEMA_DIR}, found {len(schemas)}"
    n = len(SEEDS)

    def chat(name, schema):
        r = client.chat.completions.create(
            model="gemma", messages=[{"role": "user", "content": f"JSON Schema:\n{json.dumps(schema)}\n"
                                                                 "Write one short JSON value valid under it."}],
            response_format={"type": "json_schema", "json_schema": {"name": name[:64], "schema": schema}},
            temperature=1, seed=SEEDS[0], n=n, max_tokens=MAX_TOKENS)
        return [(c.message.content, c.finish_reason) for c in r.choices]

    def completion(name, schema):
        r = client.completions.create(
            model="gemma", prompt=f"JSON Schema:\n{json.dumps(schema)}\nA short JSON value valid under it:\n",
            temperature=1, seed=SEEDS[0], n=n, max_tokens=MAX_TOKENS, extra_body={"guided_json": schema})
        return [(c.text, c.finish_reason) for c in r.choices]

    jobs, labels = [], []
    for name, schema in schemas:
        for endpoint, fn in (("chat", chat), ("completions", completion)):
            jobs.append(lambda f=fn, n=name, s=schema: f(n, s))
            labels.append((name, schema, endpoint))
    for (name, schema, endpoint), choices in zip(labels, run_all(jobs)):
        assert len(choices) == n
        for k, (text, finish) in enumerate(choices):
            where = f"{name} on {endpoint}, seed {SEEDS[0] + k}"
            assert finish == "stop", f"{where}: finish_reason {finish}, text {text!r}"
            validate(schema, text, where)


def test_json_schema_streamed(client):
    schema = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
              "properties": {"name": {"type": "string", "maxLength": 12},
                             "age": {"type": "integer", "minimum": 0, "maximum": 120}}}
    stream = client.chat.completions.create(
        model="gemma", messages=[{"role": "user", "content": "A person as JSON."}], stream=True, seed=5,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema}},
        max_tokens=MAX_TOKENS)
    text, finish = "", None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
    assert finish == "stop"
    validate(schema, text, "streamed json_schema")


# --- (b) json_object, (c) regex / grammar / choice ------------------------


def test_json_object(client):
    def chat(seed):
        r = client.chat.completions.create(
            model="gemma", messages=[{"role": "user", "content": "Describe a cat as a JSON object."}],
            response_format={"type": "json_object"}, seed=seed, max_tokens=120)
        return r.choices[0]

    def completion_structured_outputs(seed):
        r = client.completions.create(model="gemma", prompt="A JSON object:", seed=seed, max_tokens=120,
                                      extra_body={"structured_outputs": {"json_object": True}})
        return r.choices[0]

    for c in run_all([lambda s=s: chat(s) for s in SEEDS] + [lambda: completion_structured_outputs(7)]):
        text = c.message.content if hasattr(c, "message") else c.text
        if c.finish_reason == "stop":
            assert isinstance(json.loads(text), dict), text
        else:  # an unbounded object may run out of tokens; it is still a prefix
            assert c.finish_reason == "length" and text.lstrip().startswith("{"), text


def test_regex_grammar_and_choice(client):
    phone = r"\(\d{3}\) \d{3}-\d{4}"
    gbnf = 'root ::= answer " because " reason "."\nanswer ::= "yes" | "no"\nreason ::= [a-z]{1,10} (" " [a-z]{1,10}){0,5}'
    gbnf_re = r"(yes|no) because [a-z]{1,10}( [a-z]{1,10}){0,5}\."
    cases = [
        ("completions", {"guided_regex": phone}, phone),
        ("chat", {"guided_regex": phone}, phone),
        ("completions", {"structured_outputs": {"regex": r"[A-Z][a-z]{2,8}"}}, r"[A-Z][a-z]{2,8}"),
        ("completions", {"guided_grammar": gbnf}, gbnf_re),
        ("chat", {"grammar": gbnf}, gbnf_re),  # llama.cpp's field
        ("completions", {"guided_choice": ["red", "green", "blue"]}, r"red|green|blue"),
        ("chat", {"structured_outputs": {"choice": ["alpha", "beta"]}}, r"alpha|beta"),
    ]

    def run(endpoint, extra, seed):
        if endpoint == "chat":
            r = client.chat.completions.create(model="gemma", messages=[{"role": "user", "content": "Answer."}],
                                               seed=seed, max_tokens=60, extra_body=extra)
            return r.choices[0].message.content, r.choices[0].finish_reason
        r = client.completions.create(model="gemma", prompt="Answer:", seed=seed, max_tokens=60, extra_body=extra)
        return r.choices[0].text, r.choices[0].finish_reason

    jobs = [lambda e=endpoint, x=extra, s=seed: run(e, x, s) for endpoint, extra, _ in cases for seed in SEEDS]
    results = run_all(jobs)
    for i, (text, finish) in enumerate(results):
        endpoint, extra, pattern = cases[i // len(SEEDS)]
        assert finish == "stop", (endpoint, extra, text, finish)
        assert re.fullmatch(pattern, text), (endpoint, extra, text)


# --- (d) tools -------------------------------------------------------------


def check_calls(choice, names=None, count=None):
    """Checks a choice's tool calls. With parallel calls allowed the base
    model may keep calling until max_tokens: then the choice ends with
    "length" and only its last call may be incomplete."""
    message, finish = choice.message, choice.finish_reason
    calls = message.tool_calls
    assert calls, message
    assert finish == "tool_calls" or (finish == "length" and count is None), (finish, message)
    if count is not None:
        assert len(calls) == count, calls
    for i, c in enumerate(calls):
        assert c.type == "function"
        assert re.fullmatch(r"call_[0-9a-f]{24}", c.id), c.id
        assert c.function.name in (names or PARAMS), c.function.name
        if finish == "tool_calls" or i < len(calls) - 1:
            validate(PARAMS[c.function.name], c.function.arguments, f"{c.function.name} arguments")
    return calls


def test_tools_whole_responses(client):
    named = {"type": "function", "function": {"name": "get_time"}}

    def ask(max_tokens=MAX_TOKENS, **kw):
        return client.chat.completions.create(model="gemma", messages=ASK, tools=TOOLS, seed=3,
                                              max_tokens=max_tokens, **kw)

    required, named_r, single, two, auto, none = run_all([
        lambda: ask(tool_choice="required", max_tokens=PARALLEL_MAX_TOKENS),
        lambda: ask(tool_choice=named),
        lambda: ask(tool_choice="required", parallel_tool_calls=False),
        lambda: ask(tool_choice="required", n=2, max_tokens=PARALLEL_MAX_TOKENS),
        lambda: ask(tool_choice="auto", max_tokens=PARALLEL_MAX_TOKENS),
        lambda: ask(tool_choice="none", max_tokens=40),
    ])
    check_calls(required.choices[0])
    assert required.choices[0].message.content is None
    check_calls(named_r.choices[0], names=["get_time"], count=1)
    check_calls(single.choices[0], count=1)
    assert len(two.choices) == 2
    for c in two.choices:
        check_calls(c)
    a = auto.choices[0]
    if a.message.tool_calls:
        check_calls(a)
    else:
        assert a.message.content and a.message.content[0] not in "< \t\r\n", a.message.content
        assert a.finish_reason in ("stop", "length")
    n = none.choices[0]
    assert not n.message.tool_calls and isinstance(n.message.content, str)
    assert n.finish_reason in ("stop", "length")


def test_tools_streamed(client):
    stream = client.chat.completions.create(model="gemma", messages=ASK, tools=TOOLS, tool_choice="required",
                                            seed=4, max_tokens=PARALLEL_MAX_TOKENS, stream=True)
    calls, content, finish, pieces = {}, "", None, 0
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for d in delta.tool_calls or []:
            if d.id:
                assert d.index not in calls and d.type == "function" and d.function.name
                calls[d.index] = {"id": d.id, "name": d.function.name, "arguments": ""}
            calls[d.index]["arguments"] += d.function.arguments or ""
            pieces += 1
        finish = chunk.choices[0].finish_reason or finish
    assert finish in ("tool_calls", "length")
    assert content == "", content  # no call syntax leaks as text
    assert calls and sorted(calls) == list(range(len(calls)))
    complete = len(calls) if finish == "tool_calls" else len(calls) - 1
    assert complete >= 1
    for i in range(len(calls)):
        c = calls[i]
        assert re.fullmatch(r"call_[0-9a-f]{24}", c["id"]) and c["name"] in PARAMS
        if i < complete:
            validate(PARAMS[c["name"]], c["arguments"], "streamed arguments")
    assert pieces >= len(calls)
    # One call only (parallel_tool_calls false) ends with "tool_calls".
    stream = client.chat.completions.create(model="gemma", messages=ASK, tools=TOOLS, tool_choice="required",
                                            parallel_tool_calls=False, seed=5, max_tokens=MAX_TOKENS, stream=True)
    chunks = [c for c in stream if c.choices]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    args = "".join(d.function.arguments or "" for c in chunks for d in c.choices[0].delta.tool_calls or [])
    names = [d.function.name for c in chunks for d in c.choices[0].delta.tool_calls or [] if d.id]
    assert len(names) == 1
    validate(PARAMS[names[0]], args, "single streamed call")


def test_tools_stream_helper(client):
    if not hasattr(client.chat.completions, "stream"):
        pytest.skip("this openai version has no chat.completions.stream helper")
    with client.chat.completions.stream(model="gemma", messages=ASK, tools=TOOLS, seed=6, max_tokens=MAX_TOKENS,
                                        tool_choice={"type": "function", "function": {"name": "get_weather"}}) as s:
        for _ in s:
            pass
        final = s.get_final_completion()
    calls = check_calls(final.choices[0], names=["get_weather"], count=1)
    # The helper parses strict tools' arguments itself.
    assert calls[0].function.parsed_arguments == json.loads(calls[0].function.arguments)


def test_tools_multi_turn(client, server):
    first = client.chat.completions.create(model="gemma", messages=ASK, tools=TOOLS, tool_choice="required", seed=8,
                                           parallel_tool_calls=False, max_tokens=MAX_TOKENS)
    msg = first.choices[0].message
    calls = check_calls(first.choices[0], count=1)
    history = ASK + [msg] + [{"role": "tool", "tool_call_id": c.id, "content": "18 degrees" if
                              c.function.name == "get_weather" else "12:00"} for c in calls]
    # The assistant message goes back as the client gives it (content null,
    # refusal null, tool_calls): the Gemma template must accept the turns.
    second = client.chat.completions.create(model="gemma", messages=history, tools=TOOLS, tool_choice="auto",
                                            seed=9, max_tokens=40)
    c = second.choices[0]
    assert c.message.tool_calls or c.message.content
    tok = server.http.post("/tokenize", json={"messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "{\"zone\": \"UTC\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "12:00"}], "with_pieces": True}).json()
    text = "".join(tok["pieces"])
    assert "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>" in text, text
    assert "<tool_response>\n12:00\n</tool_response>" in text, text


def test_tools_refusals(client):
    expect_400(lambda: client.chat.completions.create(
        model="gemma", messages=ASK, tools=TOOLS, response_format={"type": "json_object"}),
        "response_format", "cannot be combined with 'tools'")
    expect_400(lambda: client.chat.completions.create(
        model="gemma", messages=ASK, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}),
        "tool_choice", "does not declare")
    bad = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "patternProperties": {"^x": {"type": "string"}}}}}
    expect_400(lambda: client.chat.completions.create(model="gemma", messages=ASK, tools=[bad],
                                                      tool_choice="required"), "tools", "patternProperties")


# --- (e) adversarial constraints ------------------------------------------


def schema_format(schema, name="s"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


def works_or_400(client, schema, check):
    """Sends a schema that must either work (its output validated by
    `check`) or be refused with a 400 naming response_format, within the
    bound. Returns "ok" or the refusal message."""
    start = time.monotonic()
    try:
        r = client.chat.completions.create(model="gemma", messages=[{"role": "user", "content": "JSON:"}],
                                           response_format=schema_format(schema), seed=1, max_tokens=150)
    except openai.BadRequestError as e:
        assert time.monotonic() - start < REFUSAL_BOUND_S
        assert e.body["param"] == "response_format", e.body
        return e.body["message"]
    c = r.choices[0]
    if c.finish_reason == "stop":
        check(c.message.content)
    else:
        assert c.finish_reason == "length"
    return "ok"


def test_adversarial_schemas(client):
    deep = {"type": "integer"}
    for _ in range(200):
        deep = {"type": "object", "properties": {"a": deep}, "required": ["a"]}
    recursive = {"$defs": {"node": {"type": "object", "properties": {
        "value": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}}, "required": ["value"]}},
        "$ref": "#/$defs/node"}
    big_enum = {"enum": [f"value-{i}" for i in range(10000)]}
    results = run_all([
        lambda: works_or_400(client, deep, lambda t: validate(deep, t, "deep")),
        lambda: works_or_400(client, recursive, lambda t: validate(recursive, t, "recursive")),
        lambda: works_or_400(client, big_enum, lambda t: validate(big_enum, t, "enum")),
    ])
    print("adversarial schemas:", [r[:120] for r in results])


def test_adversarial_refusals(client):
    def chat(**extra):
        return lambda: client.chat.completions.create(
            model="gemma", messages=[{"role": "user", "content": "x"}], max_tokens=5, extra_body=extra)

    def completion(**extra):
        return lambda: client.completions.create(model="gemma", prompt="x", max_tokens=5, extra_body=extra)

    expect_400(chat(response_format=schema_format({"type": "object", "patternProperties": {"^a": {}}})),
               "response_format", "patternProperties")
    expect_400(completion(guided_json={"type": "object", "patternProperties": {"^a": {}}}), "guided_json",
               "patternProperties")
    expect_400(chat(response_format=schema_format({"type": "strin"})), "response_format")
    expect_400(chat(response_format=schema_format({"type": 5})), "response_format")
    expect_400(completion(guided_regex="(a)\\1"), "guided_regex")
    expect_400(completion(guided_regex="["), "guided_regex")
    expect_400(completion(guided_grammar="root ::= undefined-rule"), "guided_grammar")
    expect_400(completion(grammar="root ::= (\"a\""), "grammar")
    expect_400(completion(guided_regex="a", guided_choice=["a"]), "guided_choice", "both constrain")
    expect_400(completion(guided_regex="(" * 2000 + ")" * 2000), "guided_regex")


def regex_works_or_400(client, pattern, max_tokens=12):
    """A regex that must either work (the output is a prefix of a match, or
    a whole one when it stopped) or be refused naming guided_regex, within
    a bound. Returns "ok" or the refusal message."""
    start = time.monotonic()
    try:
        r = client.completions.create(model="gemma", prompt="x", max_tokens=max_tokens,
                                      extra_body={"guided_regex": pattern})
    except openai.BadRequestError as e:
        assert e.body["param"] == "guided_regex", e.body
        return e.body["message"]
    finally:
        assert time.monotonic() - start < 3 * REFUSAL_BOUND_S
    c = r.choices[0]
    if c.finish_reason == "stop":
        assert re.fullmatch(pattern, c.text), c.text
    else:
        assert c.finish_reason == "length" and c.text, c
    return "ok"


def test_adversarial_patterns(client):
    huge = "|".join(f"w{i:05d}x{i % 97}" for i in range(50000))  # a ~500 KB alternation
    results = run_all([
        lambda: regex_works_or_400(client, huge),
        lambda: regex_works_or_400(client, "(x{1000}){1000}"),  # a million x's
        lambda: regex_works_or_400(client, "[a-z]{0,9999}[0-9]{0,9999}"),
    ])
    print("adversarial patterns:", [r[:120] for r in results])


def test_constrained_and_free_requests_batch_together(client, server):
    schema = {"type": "object", "required": ["ok"], "additionalProperties": False,
              "properties": {"ok": {"type": "boolean"}}}
    spans = {}

    def timed(name, fn):
        start = time.monotonic()
        out = fn()
        spans[name] = (start, time.monotonic())
        return out

    free, constrained = run_all([
        lambda: timed("free", lambda: client.completions.create(
            model="gemma", prompt="Once upon a time", max_tokens=60, temperature=0)),
        lambda: timed("constrained", lambda: client.completions.create(
            model="gemma", prompt="Status as JSON:", max_tokens=60, seed=2, extra_body={"guided_json": schema})),
    ])
    assert free.choices[0].text and free.usage.completion_tokens > 0
    assert constrained.choices[0].finish_reason == "stop"
    validate(schema, constrained.choices[0].text, "constrained next to free")
    # The two were in flight at the same time (so the engine stepped them together).
    assert spans["free"][0] < spans["constrained"][1] and spans["constrained"][0] < spans["free"][1]
