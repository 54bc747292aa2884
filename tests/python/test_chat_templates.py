"""The model's own chat template on `tokenmill serve`, end to end, with the
real Gemma 3 270M behind published templates of other families
(--chat-template-file; the weights do not matter for the mechanics): the
prompt the server builds (llama.cpp's POST /apply-template) equals Python
jinja2's rendering with Hugging Face's settings; think spans come back as
reasoning_content, whole and streamed; tool calls written in the
template's family format come back as OpenAI tool_calls; a template's
refusal is a 400 carrying its message; a hostile template fails the
request (500) within its bound and the server lives on.

The output is forced with guided_regex or the tool grammar: the model is a
base model, so only the mechanics are asserted, never reply quality."""
import json
import os
import time

import pytest

from conftest import REPO, require_module
from test_server_common import Server

require_module("jinja2", "jinja2", "the reference renderer of chat templates")
import chat_template_oracle as oracle  # noqa: E402  (needs jinja2)

ENGINE = ["-t", "2", "--kv-memory", "128M", "--max-seqs", "8"]
TEMPLATES = os.path.join(REPO, "tests", "data", "chat_templates")
GEMMA_BOS, GEMMA_EOS = "<bos>", "<eos>"  # what the server passes as bos_token / eos_token

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["city"],
                   "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}}}}}
ASK = [{"role": "system", "content": "Be brief."},
       {"role": "user", "content": "Weather in Paris? Ünïcödé ✓"}]
HISTORY = ASK + [
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}]


def jinja2_render(name, messages, tools=None, **kwargs):
    """Hugging Face's rendering with the server's special tokens."""
    template = oracle.make_environment().from_string(open(os.path.join(TEMPLATES, name), encoding="utf-8").read())
    context = dict(kwargs, messages=messages, add_generation_prompt=True, bos_token=GEMMA_BOS, eos_token=GEMMA_EOS)
    if tools is not None:
        context["tools"] = tools
    return template.render(**context)


def as_template_sees(messages):
    """Tool-call arguments as objects, as the server passes them (and vLLM),
    and a null content as ""."""
    out = json.loads(json.dumps(messages))
    for m in out:
        if m.get("content") is None:
            m["content"] = ""
        for c in m.get("tool_calls") or []:
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    return out


def serve(tokenmill_bin, gemma_path, template, *extra):
    return Server(tokenmill_bin, gemma_path, *ENGINE, "--model-alias", "m",
                  "--chat-template-file", os.path.join(TEMPLATES, template) if "/" not in template else template, *extra)


@pytest.fixture(scope="module")
def qwen3(tokenmill_bin, gemma_path):
    with serve(tokenmill_bin, gemma_path, "Qwen-Qwen3-0.6B.jinja") as s:
        yield s


@pytest.fixture(scope="module")
def llama31(tokenmill_bin, gemma_path):
    with serve(tokenmill_bin, gemma_path, "meta-llama-Llama-3.1-8B-Instruct.jinja") as s:
        yield s


@pytest.mark.parametrize("kwargs", [{}, {"enable_thinking": False}])
def test_apply_template_equals_jinja2(qwen3, kwargs):
    for messages, tools in [(ASK, None), (ASK, [WEATHER]), (HISTORY, [WEATHER])]:
        body = {"messages": messages, "chat_template_kwargs": kwargs}
        if tools:
            body["tools"] = tools
        r = qwen3.http.post("/apply-template", json=body)
        assert r.status_code == 200, r.text
        assert r.json()["prompt"] == jinja2_render("Qwen-Qwen3-0.6B.jinja", as_template_sees(messages), tools,
                                                   **kwargs)


def test_llama31_system_header_and_tools_equal_jinja2(llama31):
    r = llama31.http.post("/apply-template", json={"messages": HISTORY, "tools": [WEATHER]})
    assert r.status_code == 200, r.text
    prompt = r.json()["prompt"]
    assert "Cutting Knowledge Date" in prompt and "Today Date" in prompt
    assert prompt == jinja2_render("meta-llama-Llama-3.1-8B-Instruct.jinja", as_template_sees(HISTORY), [WEATHER])
    # llama.cpp's /props reports the template in use.
    with open(os.path.join(TEMPLATES, "meta-llama-Llama-3.1-8B-Instruct.jinja"), encoding="utf-8") as f:
        assert llama31.http.get("/props").json()["chat_template"] == f.read()


THINK = r"<think>\n[a-z]{3,12}( [a-z]{3,12}){0,3}\n</think>\n\n[A-Z][a-z]{2,10}( [a-z]{2,10}){0,3}\."


def test_reasoning_content_whole_and_streamed(qwen3):
    client = qwen3.client()
    args = dict(model="m", messages=ASK, temperature=0, max_tokens=60, extra_body={"guided_regex": THINK})
    whole = client.chat.completions.create(**args).choices[0]
    reasoning = whole.message.model_extra.get("reasoning_content")
    assert reasoning, whole
    assert "<think>" not in whole.message.content and "</think>" not in whole.message.content
    assert whole.message.content[0].isupper() and whole.message.content.endswith(".")
    streamed = {"reasoning_content": "", "content": ""}
    for chunk in client.chat.completions.create(stream=True, **args):
        for choice in chunk.choices:
            for field in streamed:
                streamed[field] += (choice.delta.model_extra or {}).get(field) or getattr(choice.delta, field, "") or ""
    assert streamed == {"reasoning_content": reasoning, "content": whole.message.content}


def test_reasoning_format_none_leaves_think_in_content(tokenmill_bin, gemma_path):
    with serve(tokenmill_bin, gemma_path, "Qwen-Qwen3-0.6B.jinja", "--reasoning-format", "none") as s:
        msg = s.client().chat.completions.create(model="m", messages=ASK, temperature=0, max_tokens=60,
                                                 extra_body={"guided_regex": THINK}).choices[0].message
    assert msg.content.startswith("<think>\n") and "</think>" in msg.content
    assert not (msg.model_extra or {}).get("reasoning_content")


def check_weather_calls(choice):
    assert choice.finish_reason == "tool_calls", choice
    calls = choice.message.tool_calls
    assert calls and all(c.function.name == "get_weather" for c in calls), choice
    for c in calls:
        assert json.loads(c.function.arguments)["city"] in ("Paris", "Rome")


@pytest.mark.parametrize("fixture,wire_format", [("qwen3", "hermes"), ("llama31", "llama3_json")])
def test_tool_calls_in_the_templates_format(request, fixture, wire_format):
    server = request.getfixturevalue(fixture)
    client = server.client()
    args = dict(model="m", messages=ASK, tools=[WEATHER], tool_choice="required", temperature=0, max_tokens=80,
                parallel_tool_calls=False)
    whole = client.chat.completions.create(**args).choices[0]
    check_weather_calls(whole)
    names, arguments = {}, {}
    for chunk in client.chat.completions.create(stream=True, **args):
        for d in chunk.choices[0].delta.tool_calls or []:
            if d.function.name:
                names[d.index] = d.function.name
            arguments[d.index] = arguments.get(d.index, "") + (d.function.arguments or "")
    assert [names[i] for i in sorted(names)] == [c.function.name for c in whole.message.tool_calls]
    assert [arguments[i] for i in sorted(arguments)] == [c.function.arguments for c in whole.message.tool_calls]
    server.wait_events(lambda e: e.get("event") == "request" and e.get("tool_format") == wire_format, count=2)


def test_template_refusal_is_a_400(tokenmill_bin, gemma_path):
    with serve(tokenmill_bin, gemma_path, "google-gemma-2-2b-it.jinja") as s:
        r = s.http.post("/v1/chat/completions", json={"model": "m", "messages": ASK, "max_tokens": 1})
        assert r.status_code == 400, r.text
        assert "System role not supported" in r.json()["error"]["message"]
        ok = s.http.post("/v1/chat/completions", json={"model": "m", "messages": ASK[1:], "max_tokens": 1})
        assert ok.status_code == 200, ok.text


def test_hostile_template_fails_the_request_not_the_server(tokenmill_bin, gemma_path, tmp_path):
    hostile = tmp_path / "hostile.jinja"
    hostile.write_text("{% set ns = namespace(s='x') %}{% for i in range(100000000) %}"
                       "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}")
    with serve(tokenmill_bin, gemma_path, str(hostile)) as s:
        start = time.monotonic()
        r = s.http.post("/v1/chat/completions", json={"model": "m", "messages": ASK[1:], "max_tokens": 1})
        assert r.status_code == 500, r.text
        assert "bounds" in r.json()["error"]["message"]
        assert time.monotonic() - start < 30
        assert s.http.get("/health").status_code == 200


def test_gpt_oss_channels_split_into_reasoning_and_content(tokenmill_bin, gemma_path):
    harmony = (r"<\|channel\|>analysis<\|message\|>[a-z]{3,10}( [a-z]{3,10}){0,3}<\|end\|>"
               r"<\|start\|>assistant<\|channel\|>final<\|message\|>[A-Z][a-z]{2,10}( [a-z]{2,10}){0,3}\.")
    with serve(tokenmill_bin, gemma_path, "openai-gpt-oss-120b.jinja") as s:
        client = s.client()
        args = dict(model="m", messages=ASK, temperature=0, max_tokens=60, extra_body={"guided_regex": harmony})
        msg = client.chat.completions.create(**args).choices[0].message
        reasoning = (msg.model_extra or {}).get("reasoning_content")
        assert reasoning and "<|" not in reasoning, msg
        assert msg.content[0].isupper() and msg.content.endswith(".") and "<|" not in msg.content, msg
        streamed = {"reasoning_content": "", "content": ""}
        for chunk in client.chat.completions.create(stream=True, **args):
            for choice in chunk.choices:
                for field in streamed:
                    streamed[field] += (choice.delta.model_extra or {}).get(field) or getattr(choice.delta, field, "") or ""
        assert streamed == {"reasoning_content": reasoning, "content": msg.content}
