"""The client libraries people already have, against `tokenmill serve` on the
tiny synthetic model: LangChain's ChatOpenAI (invoke, stream, batch) and
OpenAIEmbeddings, litellm's completion() (plain and streamed) and
embedding(), the async openai client, and chat histories with tool calls
sent back the way these libraries send them. Each library's answer is
checked against the official openai client's answer to the same request
(an independent path to the same server), and streamed text against the
whole text, at temperature 0 with a seed.

Nothing may leave the machine: litellm is told to use its bundled model
cost map, LangChain's tracing is off, embeddings skip the tiktoken length
check (its default downloads an encoding), and every socket connection or
name lookup that is not to this machine is refused and recorded, which
fails the test that made it.

Also here: the served model's profile in GET /v1/models (a base model, its
chat template and where it came from), and tokenmill's keep-alive: one
connection serves many requests, an idle one closes after
--keep-alive-timeout."""
import asyncio
import http.client
import json
import os
import select
import socket
import time

import pytest

# Before the libraries are imported: they read these at import time.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LANGCHAIN_TRACING_V2"] = "false"
os.environ["LANGSMITH_TRACING"] = "false"
os.environ["HF_HUB_OFFLINE"] = "1"


class NetworkGuard:
    """Refuses and records connections and name lookups that leave this
    machine (127.0.0.0/8, ::1, localhost and Unix sockets are allowed)."""

    def __init__(self):
        self.attempts = []
        self.connect = socket.socket.connect
        self.connect_ex = socket.socket.connect_ex
        self.getaddrinfo = socket.getaddrinfo

    @staticmethod
    def is_local(host):
        host = host.decode() if isinstance(host, bytes) else host
        return host is None or host in ("localhost", "::1", "") or str(host).startswith("127.")

    def check(self, what, host):
        if not self.is_local(host):
            self.attempts.append(f"{what} {host}")
            raise OSError(f"test_clients: the network is off for this test ({what} {host})")

    def install(self):
        guard = self

        def connect(sock, address):
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                guard.check("connect", address[0])
            return guard.connect(sock, address)

        def connect_ex(sock, address):
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                guard.check("connect", address[0])
            return guard.connect_ex(sock, address)

        def getaddrinfo(host, *args, **kw):
            guard.check("lookup", host)
            return guard.getaddrinfo(host, *args, **kw)

        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = connect, connect_ex, getaddrinfo

    def uninstall(self):
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = (self.connect, self.connect_ex,
                                                                               self.getaddrinfo)


GUARD = NetworkGuard()
GUARD.install()  # importing the libraries must not reach the network either

from conftest import require_module  # noqa: E402
from test_server_common import Server  # noqa: E402

openai = require_module("openai", "openai", "the official client")
langchain_openai = require_module("langchain_openai", "langchain-openai", "LangChain's OpenAI client")
litellm = require_module("litellm", "litellm", "litellm's OpenAI-compatible client")
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402

GUARD.uninstall()  # on again while this module's tests run (network_off), not for other modules

# The libraries' own deprecation noise (pydantic schema warnings in litellm).
pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning:pydantic.*"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")]

MODEL = "tiny"
SEED = 7
# The tiny model's vocabulary is nearly bytes and its context 256 tokens:
# prompts and outputs stay short.
MAX_TOKENS = 8


@pytest.fixture(scope="module", autouse=True)
def network_off():
    assert GUARD.attempts == [], "importing a client library tried to reach the network"
    GUARD.install()
    yield
    GUARD.uninstall()


@pytest.fixture(autouse=True)
def network_stays_off(network_off):
    before = len(GUARD.attempts)
    yield
    assert GUARD.attempts[before:] == [], "a client library tried to reach the network"


@pytest.fixture(scope="module")
def server(tokenmill_bin, tiny):
    with Server(tokenmill_bin, tiny, "--chat-template", "chatml", "-t", "1", "--kv-memory", "32M") as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return server.client()


def chat_args(prompt, **kw):
    return dict(model=MODEL, messages=[{"role": "user", "content": prompt}], max_tokens=MAX_TOKENS, temperature=0,
                seed=SEED, **kw)


def reference_chat(client, prompt):
    """The official client's non-streamed answer: the text every library must reproduce."""
    return client.chat.completions.create(**chat_args(prompt))


def rendered_prompt(server, messages):
    """The prompt text and token count the server renders for these messages."""
    r = server.http.post("/tokenize", json={"model": MODEL, "messages": messages, "with_pieces": True})
    assert r.status_code == 200, r.text
    body = r.json()
    return "".join(body["pieces"]), body["count"]


def test_models_report_the_profile_and_the_log_says_why(server, client):
    [card] = [m for m in client.models.list().data if m.id == MODEL]
    # The synthetic model has no chat template and no instruction-tuning
    # name: a base model, served with the template given on the command line.
    assert card.model_extra["base_model"] is True
    assert card.model_extra["chat_template"] == "chatml"
    assert card.model_extra["chat_template_source"] == "--chat-template"
    notices = [e["message"] for e in server.wait_events(lambda e: e.get("event") == "notice", count=2)]
    assert any("base model" in n for n in notices), notices
    assert any("no chat template" in n and "chatml" in n for n in notices), notices
    [ready] = server.wait_events(lambda e: e.get("event") == "ready")
    assert ready["base_model"] is True and ready["chat_template"] == "chatml"


def test_the_default_gemma_is_reported_as_a_base_model(tokenmill_bin, gemma_path):
    with Server(tokenmill_bin, gemma_path, "-t", "1", "--kv-memory", "64M") as s:
        [card] = s.http.get("/v1/models").json()["data"]
        assert card["base_model"] is True
        assert card["chat_template"] == "gemma"  # from <start_of_turn> in the vocabulary: the GGUF has none
        assert "vocabulary" in card["chat_template_source"]
        notices = [e["message"] for e in s.wait_events(lambda e: e.get("event") == "notice", count=2)]
        assert any("base model" in n for n in notices), notices
        assert any("no chat template" in n and "gemma" in n for n in notices), notices


def test_one_keep_alive_connection_serves_many_requests(server):
    host, port = server.http.host, server.http.port
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.connect()
    sock, local = conn.sock, conn.sock.getsockname()
    for i in range(20):
        stream = i % 2 == 1  # chunked streams and plain bodies alike
        body = {"model": MODEL, "prompt": "hi", "max_tokens": 2, "temperature": 0, "stream": stream}
        conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        assert r.status == 200, data
        assert r.getheader("Connection") == "keep-alive"
        # http.client reconnects silently when a server closes: the socket
        # must be the one the first request used.
        assert conn.sock is sock and sock.getsockname() == local, f"connection replaced after request {i}"
    conn.close()


def test_an_idle_keep_alive_connection_is_closed(tokenmill_bin, tiny):
    with Server(tokenmill_bin, tiny, "-t", "1", "--kv-memory", "8M", "--keep-alive-timeout", "0.5") as s:
        conn = http.client.HTTPConnection(s.http.host, s.http.port, timeout=30)
        conn.request("GET", "/health")
        r = conn.getresponse()
        r.read()
        assert r.status == 200 and r.getheader("Connection") == "keep-alive"
        idle_from = time.monotonic()
        readable, _, _ = select.select([conn.sock], [], [], 10)
        assert readable and conn.sock.recv(1) == b"", "the server did not close the idle connection"
        waited = time.monotonic() - idle_from
        assert 0.3 < waited < 5, waited  # the 0.5 s timeout, checked on the server's own tick
        conn.close()


def tool_history(assistant_message):
    return [{"role": "user", "content": "hi"}, assistant_message,
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}, {"role": "user", "content": "ok"}]


def test_tool_call_history_without_tools_from_the_openai_client(server, client):
    Call = openai.types.chat.ChatCompletionMessageToolCall
    Function = openai.types.chat.chat_completion_message_tool_call.Function
    message = openai.types.chat.ChatCompletionMessage(
        role="assistant", content=None,
        tool_calls=[Call(id="call_1", type="function", function=Function(name="f", arguments='{"a":1}'))])
    # Three ways an application sends the assistant's turn back: the
    # response's message object, its model_dump() (null refusal, audio,
    # function_call and annotations included), and a plain dict.
    shapes = [message, message.model_dump(),
              {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                                                                    "function": {"name": "f", "arguments": '{"a":1}'}}]}]
    answers = []
    for shape in shapes:
        r = client.chat.completions.create(model=MODEL, messages=tool_history(shape), max_tokens=4, temperature=0,
                                           seed=SEED)
        assert r.choices[0].finish_reason in ("stop", "length")
        answers.append((r.choices[0].message.content, r.usage.prompt_tokens))
    assert answers[0] == answers[1] == answers[2], answers
    # The call and its result are in the prompt, as text (no tools declared).
    text, count = rendered_prompt(server, tool_history(message.model_dump()))
    assert '"name": "f"' in text and '"a":1' in text and "sunny" in text, text
    assert count == answers[0][1]


def test_langchain_chat_invoke_stream_and_batch(server, client):
    llm = langchain_openai.ChatOpenAI(model=MODEL, base_url=server.base + "/v1", api_key="any", temperature=0,
                                      seed=SEED, max_tokens=MAX_TOKENS, max_retries=0, stream_usage=True)
    want = reference_chat(client, "hello")
    got = llm.invoke("hello")
    assert got.content == want.choices[0].message.content and got.content
    assert got.usage_metadata["input_tokens"] == want.usage.prompt_tokens
    assert got.usage_metadata["output_tokens"] == want.usage.completion_tokens == MAX_TOKENS
    assert got.response_metadata["finish_reason"] == want.choices[0].finish_reason == "length"
    chunks = list(llm.stream("hello"))
    assert len(chunks) >= MAX_TOKENS // 2  # really streamed, not one piece
    assert "".join(c.content for c in chunks) == got.content
    usage = [c.usage_metadata for c in chunks if c.usage_metadata]
    assert usage and usage[-1]["output_tokens"] == MAX_TOKENS
    assert [c.response_metadata.get("finish_reason") for c in chunks if c.response_metadata.get("finish_reason")] \
        == ["length"]
    prompts = ["hello", "hi there", "abc"]
    batch = llm.batch(prompts)
    assert [m.content for m in batch] == [reference_chat(client, p).choices[0].message.content for p in prompts]


def test_langchain_tool_call_history(server, client):
    llm = langchain_openai.ChatOpenAI(model=MODEL, base_url=server.base + "/v1", api_key="any", temperature=0,
                                      seed=SEED, max_tokens=4, max_retries=0)
    history = [HumanMessage("hi"), AIMessage(content="", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "call_1"}]),
               ToolMessage("sunny", tool_call_id="call_1"), HumanMessage("ok")]
    got = llm.invoke(history)
    want = client.chat.completions.create(model=MODEL, messages=tool_history(
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]}),
        max_tokens=4, temperature=0, seed=SEED)
    assert got.content == want.choices[0].message.content
    assert got.usage_metadata["input_tokens"] == want.usage.prompt_tokens


def test_litellm_completion_plain_and_streamed(server, client):
    args = dict(model=f"openai/{MODEL}", api_base=server.base + "/v1", api_key="any",
                messages=[{"role": "user", "content": "hello"}], max_tokens=MAX_TOKENS, temperature=0, seed=SEED)
    want = reference_chat(client, "hello")
    got = litellm.completion(**args)
    assert got.choices[0].message.content == want.choices[0].message.content
    assert got.choices[0].finish_reason == "length"
    assert (got.usage.prompt_tokens, got.usage.completion_tokens) == (want.usage.prompt_tokens, MAX_TOKENS)
    chunks = list(litellm.completion(**args, stream=True, stream_options={"include_usage": True}))
    pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert len([p for p in pieces if p]) >= MAX_TOKENS // 2
    assert "".join(pieces) == want.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    usage = [c.usage for c in chunks if getattr(c, "usage", None)]
    assert usage and usage[-1].completion_tokens == MAX_TOKENS
    assert usage[-1].prompt_tokens == want.usage.prompt_tokens


def test_async_openai_chat_streaming(server, client):
    prompts = ["hello", "hi there", "abc"]
    want = [reference_chat(client, p).choices[0].message.content for p in prompts]

    async def one(aclient, prompt):
        stream = await aclient.chat.completions.create(**chat_args(prompt), stream=True,
                                                       stream_options={"include_usage": True})
        text, finish, usage = "", [], None
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                if chunk.choices[0].finish_reason:
                    finish.append(chunk.choices[0].finish_reason)
            if chunk.usage:
                usage = chunk.usage
        return text, finish, usage

    async def all_at_once():
        async with openai.AsyncOpenAI(base_url=server.base + "/v1", api_key="any", max_retries=0) as aclient:
            return await asyncio.gather(*(one(aclient, p) for p in prompts))

    results = asyncio.run(all_at_once())
    assert [r[0] for r in results] == want
    for _, finish, usage in results:
        assert finish == ["length"] and usage.completion_tokens == MAX_TOKENS


def reference_embeddings(server, texts):
    """Float vectors straight from the server (encoding_format float, no client decoding)."""
    r = server.http.post("/v1/embeddings", json={"model": MODEL, "input": texts, "encoding_format": "float"})
    assert r.status_code == 200, r.text
    return [d["embedding"] for d in sorted(r.json()["data"], key=lambda d: d["index"])]


def assert_same_vectors(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert len(g) == len(w) > 0
        assert g == pytest.approx(w, abs=1e-6)


def test_langchain_embeddings(server):
    texts = ["hello", "the weather"]
    want = reference_embeddings(server, texts)
    assert want[0] != want[1]
    emb = langchain_openai.OpenAIEmbeddings(model=MODEL, base_url=server.base + "/v1", api_key="any",
                                            check_embedding_ctx_length=False, max_retries=0)
    assert_same_vectors(emb.embed_documents(texts), want)
    assert_same_vectors([emb.embed_query("hello")], want[:1])


def test_litellm_embedding(server):
    texts = ["hello", "the weather"]
    want = reference_embeddings(server, texts)
    r = litellm.embedding(model=f"openai/{MODEL}", api_base=server.base + "/v1", api_key="any", input=texts)
    got = [d["embedding"] for d in sorted(r.data, key=lambda d: d["index"])]
    assert_same_vectors(got, want)
    assert r.usage.prompt_tokens > 0
