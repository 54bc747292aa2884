"""llama.cpp's native server API on `tokenmill serve`, driven with raw
llama.cpp-shaped requests (the bodies llama.cpp's own clients send):
/completion in its prompt forms, streamed as SSE; n_probs; stop types;
/infill on a model whose vocabulary has FIM tokens; /props, /slots,
/health; /tokenize and /detokenize in llama.cpp's shape; the OpenAI routes
without /v1. Expected texts come from independent paths: `tokenmill run`
and the /v1 routes."""
import http.client
import json
import os
import socket
import threading
import time

import pytest

from conftest import run_tokenmill
from test_server_common import Server, sse_events

PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def server(tokenmill_bin, tiny):
    with Server(tokenmill_bin, tiny, "--chat-template", "chatml", "-t", "1", "--kv-memory", "32M",
                "--max-seqs", "4") as s:
        yield s


def post(server, path, body):
    return server.http.post(path, json=body)


def completion(server, **body):
    r = post(server, "/completion", body)
    assert r.status_code == 200, r.text
    return r.json()


def run_text(binary, model, prompt, n):
    """What `tokenmill run` generates greedily (it ends its output with one newline)."""
    out = run_tokenmill(binary, "run", "-m", model, "-t", "1", "--temp", "0", "-p", prompt, "-n", str(n)).stdout
    assert out.endswith("\n")
    return out[:-1]


def stream_chunks(server, body, path="/completion"):
    r = post(server, path, {**body, "stream": True})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text)
    assert "[DONE]" not in events  # llama.cpp's /completion stream has no terminator
    return [json.loads(e) for e in events]


def test_completion_matches_run(tokenmill_bin, tiny, server):
    r = completion(server, prompt=PROMPT, n_predict=8, temperature=0, return_tokens=True)
    assert r["content"] == run_text(tokenmill_bin, tiny, PROMPT, 8)
    assert r["stop"] is True and r["index"] == 0 and r["model"] == "tiny"
    ids = server.http.post("/tokenize", json={"prompt": PROMPT}).json()["tokens"]
    assert r["tokens_evaluated"] == len(ids)
    assert r["tokens_predicted"] == len(r["tokens"]) == 8 or r["stop_type"] == "eos"
    assert r["stop_type"] in ("limit", "eos")
    assert r["stopped_limit"] == (r["stop_type"] == "limit") and r["stopped_eos"] == (r["stop_type"] == "eos")
    assert r["stopped_word"] is False and r["stopping_word"] == "" and r["truncated"] is False
    t = r["timings"]
    assert t["prompt_n"] + t["cache_n"] == len(ids) and t["predicted_n"] == r["tokens_predicted"]
    assert t["prompt_ms"] >= 0 and t["predicted_per_second"] >= 0
    g = r["generation_settings"]
    assert g["n_predict"] == 8 and g["temperature"] == 0 and g["n_ctx"] == 256
    assert r["prompt"].endswith(PROMPT)
    # The same text as the OpenAI route gives.
    v1 = post(server, "/v1/completions", {"prompt": PROMPT, "max_tokens": 8, "temperature": 0}).json()
    assert v1["choices"][0]["text"] == r["content"]


def test_prompt_forms(server):
    ids = server.http.post("/tokenize", json={"prompt": PROMPT}).json()["tokens"]  # BOS first
    want = completion(server, prompt=PROMPT, n_predict=6, temperature=0)
    by_ids = completion(server, prompt=ids, n_predict=6, temperature=0)
    assert by_ids["content"] == want["content"] and by_ids["tokens_evaluated"] == len(ids)
    # Ids, then text: the text gets no BOS of its own.
    mixed = completion(server, prompt=[ids[0], PROMPT], n_predict=6, temperature=0)
    assert mixed["content"] == want["content"] and mixed["tokens_evaluated"] == len(ids)
    other = completion(server, prompt="The dog", n_predict=6, temperature=0)
    many = post(server, "/completion", {"prompt": [PROMPT, [*ids], "The dog"], "n_predict": 6,
                                        "temperature": 0}).json()
    assert isinstance(many, list) and [m["index"] for m in many] == [0, 1, 2]
    assert [m["content"] for m in many] == [want["content"], want["content"], other["content"]]


def test_streaming(server):
    whole = completion(server, prompt=PROMPT, n_predict=10, temperature=0, return_tokens=True)
    chunks = stream_chunks(server, {"prompt": PROMPT, "n_predict": 10, "temperature": 0})
    *parts, last = chunks
    assert parts and all(c["stop"] is False and len(c["tokens"]) == 1 for c in parts)
    assert [c["tokens"][0] for c in parts] == whole["tokens"][:len(parts)]
    assert [c["tokens_predicted"] for c in parts] == list(range(1, len(parts) + 1))
    assert last["stop"] is True and last["stop_type"] == whole["stop_type"]
    assert "".join(c["content"] for c in chunks) == whole["content"]
    assert last["tokens_predicted"] == whole["tokens_predicted"] and "timings" in last
    assert last["generation_settings"]["stream"] is True


def test_n_probs(server):
    r = completion(server, prompt=PROMPT, n_predict=5, temperature=0, n_probs=3, return_tokens=True)
    probs = r["completion_probabilities"]
    assert [p["id"] for p in probs] == r["tokens"]
    for p in probs:
        top = p["top_logprobs"]
        assert 1 <= len(top) <= 3 and set(p) == {"id", "token", "bytes", "logprob", "top_logprobs"}
        assert [t["logprob"] for t in top] == sorted((t["logprob"] for t in top), reverse=True)
        assert top[0]["id"] == p["id"] and p["logprob"] <= 0  # greedy picks the most likely token
        assert bytes(p["bytes"]).decode("utf-8", errors="ignore").startswith(p["token"])
    assert r["generation_settings"]["n_probs"] == 3
    chunks = stream_chunks(server, {"prompt": PROMPT, "n_predict": 5, "temperature": 0, "n_probs": 3})
    streamed = [c["completion_probabilities"][0] for c in chunks if not c["stop"]]
    assert [s["id"] for s in streamed] == r["tokens"]
    assert [s["top_logprobs"][0]["id"] for s in streamed] == [p["top_logprobs"][0]["id"] for p in probs]


def test_stop_word_and_eos(server):
    text = completion(server, prompt=PROMPT, n_predict=24, temperature=0)["content"]
    # A short piece of the output, not in what comes before it.
    word = next(text[i:i + 2] for i in range(1, len(text) - 1)
                if text[i:i + 2].isalnum() and text[i:i + 2] not in text[:i + 1])
    r = completion(server, prompt=PROMPT, n_predict=24, temperature=0, stop=[word])
    assert r["content"] == text[:text.index(word)]
    assert r["stop_type"] == "word" and r["stopped_word"] is True and r["stopping_word"] == word
    assert r["generation_settings"]["stop"] == [word]
    # EOS (</s>, id 2) forced first: nothing is shown, one token is counted.
    eos = completion(server, prompt=PROMPT, n_predict=8, logit_bias=[[2, 100]])
    assert eos["content"] == "" and eos["stop_type"] == "eos" and eos["stopped_eos"] is True
    assert eos["tokens_predicted"] == 1
    assert eos["generation_settings"]["logit_bias"] == [{"bias": 100.0, "token": 2}]


def test_llama_defaults_and_request_translation(server):
    g = completion(server, prompt=PROMPT, n_predict=2, seed=-1)["generation_settings"]
    assert g["temperature"] == pytest.approx(0.8) and g["top_k"] == 40
    assert g["top_p"] == pytest.approx(0.95) and g["min_p"] == pytest.approx(0.05)
    assert g["seed"] == 4294967295 and g["samplers"][-1] == "temperature"
    picked = completion(server, prompt=PROMPT, n_predict=2, temperature=0,
                        response_fields=["content", "generation_settings/n_predict"])
    assert set(picked) == {"content", "generation_settings/n_predict"} and picked["generation_settings/n_predict"] == 2
    # llama.cpp's web UI sends every sampler field; the ones that are off are accepted.
    ok = completion(server, prompt=PROMPT, n_predict=2, dry_multiplier=0, xtc_probability=0, dynatemp_range=0,
                    top_n_sigma=-1, cache_prompt=True, id_slot=-1, t_max_predict_ms=500)
    assert ok["stop"] is True
    for body, param in [({"prompt": PROMPT, "dry_multiplier": 0.8}, "dry_multiplier"),
                        ({"n_predict": 2}, "prompt"),
                        ({"prompt": [1, [2]]}, "prompt"),
                        ({"prompt": [1, 999999]}, "prompt"),
                        ({"prompt": PROMPT, "logit_bias": [[5, True]]}, "logit_bias"),
                        ({"prompt": PROMPT, "echo": True}, "echo")]:
        r = post(server, "/completion", body)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"]["param"] == param, r.text
    r = post(server, "/completion", {"prompt": PROMPT, "n_predcit": 2})
    assert r.status_code == 400 and "n_predcit" in r.json()["error"]["message"]


def test_props_and_slots(server, tiny):
    props = server.http.get("/props").json()
    assert props["total_slots"] == 4 and props["model_path"] == tiny
    d = props["default_generation_settings"]
    assert d["n_ctx"] == 256 and d["params"]["temperature"] == pytest.approx(0.8) and d["params"]["n_predict"] == -1
    assert props["bos_token"] == "<s>" and props["eos_token"] == "</s>" and "build_info" in props
    slots = server.http.get("/slots").json()
    assert [s["id"] for s in slots] == [0, 1, 2, 3]
    assert not any(s["is_processing"] for s in slots) and all(s["n_ctx"] == 256 for s in slots)
    assert server.http.get("/slots?fail_on_no_slot=1").status_code == 200
    # A request that asks for a free slot gets it.
    assert completion(server, prompt=PROMPT, n_predict=2, id_slot=2)["id_slot"] == 2


@pytest.fixture(scope="module")
def one_slot_server(tokenmill_bin, slow):
    """One sequence slot, and streams paused once 1 KB waits for the client;
    the slow model, so that the engine is still generating when it pauses."""
    with Server(tokenmill_bin, slow, "-t", "1", "--kv-memory", "64M", "--max-seqs", "1",
                "--max-unsent-bytes", "1K") as s:
        yield s


def test_slots_show_a_running_request(one_slot_server):
    s = one_slot_server
    # A client that reads nothing, behind a small receive window: its stream
    # is paused in the engine, so its slot stays busy while we look.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    sock.connect((s.http.host, s.http.port))
    conn = http.client.HTTPConnection(s.http.host, s.http.port, timeout=30)
    conn.sock = sock
    body = {"prompt": PROMPT, "n_predict": 200, "ignore_eos": True, "temperature": 0, "stream": True}
    conn.request("POST", "/completion", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    first = json.loads(resp.readline().decode()[len("data: "):])
    assert resp.readline() == b"\n"  # the end of the first event
    assert first["stop"] is False and first["id_slot"] == 0
    deadline = time.time() + 10
    while True:
        slot = s.http.get("/slots").json()[0]
        if slot["is_processing"] and slot["next_token"]["n_decoded"] > 0:
            break
        assert time.time() < deadline, slot
        time.sleep(0.02)
    assert slot["id_task"] >= 0 and slot["params"]["n_predict"] == 200 and slot["params"]["ignore_eos"] is True
    assert slot["next_token"]["n_remain"] == 200 - slot["next_token"]["n_decoded"]
    r = s.http.get("/slots?fail_on_no_slot=1")
    assert r.status_code == 503 and r.json()["error"]["code"] == "no_slot_available"
    rest = resp.read().decode()
    conn.close()
    events = [json.loads(e) for e in sse_events("data: " + json.dumps(first) + "\n\n" + rest)]
    assert events[-1]["stop"] is True and events[-1]["tokens_predicted"] == 200
    deadline = time.time() + 5
    while s.http.get("/slots").json()[0]["is_processing"]:
        assert time.time() < deadline
        time.sleep(0.02)
    assert s.http.get("/slots?fail_on_no_slot=1").status_code == 200


def test_tokenize_detokenize_llama_shape(server):
    ours = server.http.post("/tokenize", json={"prompt": PROMPT, "add_special_tokens": False,
                                              "with_pieces": True}).json()
    r = server.http.post("/tokenize", json={"content": PROMPT}).json()
    assert r["tokens"] == ours["tokens"]  # llama.cpp's default: no BOS
    with_bos = server.http.post("/tokenize", json={"content": PROMPT, "add_special": True}).json()
    assert with_bos["tokens"][1:] == ours["tokens"] and with_bos["tokens"][0] == 1
    pieces = server.http.post("/tokenize", json={"content": PROMPT, "with_pieces": True}).json()["tokens"]
    assert [p["id"] for p in pieces] == ours["tokens"] and [p["piece"] for p in pieces] == ours["pieces"]
    # parse_special (llama.cpp's default): a special token's text is that token.
    special = server.http.post("/tokenize", json={"content": "</s>"}).json()["tokens"]
    assert special == [2]
    d = server.http.post("/detokenize", json={"tokens": ours["tokens"]}).json()
    assert d["content"] == d["prompt"] == PROMPT


def test_routes_without_v1(server):
    body = {"prompt": PROMPT, "max_tokens": 5, "temperature": 0}
    a, b = post(server, "/completions", body).json(), post(server, "/v1/completions", body).json()
    assert a["object"] == "text_completion" and a["choices"][0]["text"] == b["choices"][0]["text"]
    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5, "temperature": 0}
    a, b = post(server, "/chat/completions", chat).json(), post(server, "/v1/chat/completions", chat).json()
    assert a["choices"][0]["message"] == b["choices"][0]["message"]
    assert server.http.get("/models").json()["data"] == server.http.get("/v1/models").json()["data"]
    assert server.http.get("/models/tiny").json()["id"] == "tiny"
    assert server.http.get("/v1/health").json()["status"] == "ok"
    assert server.http.get("/health").json()["status"] == "ok"
    m = server.metrics()
    for path in ("/completion", "/completions", "/chat/completions", "/models"):
        assert m[f'tokenmill_http_responses_total{{endpoint="{path}",code="200"}}'] >= 1, path


def test_infill_needs_fim_tokens(server):
    r = post(server, "/infill", {"input_prefix": "def f():", "input_suffix": "\n"})
    assert r.status_code == 501 and "FIM" in r.json()["error"]["message"]


@pytest.fixture(scope="module")
def fim_server(tokenmill_bin, shared_dir, tmp_path_factory):
    """The tiny model with StarCoder's vocabulary: <fim_prefix>, <fim_suffix>,
    <fim_middle> and <file_sep> are in it (found by their text, as the file
    carries no fim_*_token_id keys)."""
    path = str(tmp_path_factory.mktemp("fim") / "fim.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "llama", "--preset", "tiny", "--type", "Q8_0", "--seed", "3",
                  "--vocab-from", os.path.join(shared_dir, "vocab", "ggml-vocab-starcoder.gguf"), "-o", path)
    with Server(tokenmill_bin, path, "-t", "1", "--kv-memory", "32M") as s:
        yield s


def test_infill_prompt_and_output(fim_server):
    s = fim_server
    body = {"input_prefix": "def add(a, b):\n    ", "input_suffix": "\n    return c\n", "prompt": "c =",
            "input_extra": [{"filename": "util.py", "text": "import os\n"}], "n_predict": 6, "temperature": 0}
    r = post(s, "/infill", body)
    assert r.status_code == 200, r.text
    r = r.json()
    want = ("<file_sep>util.py\nimport os\n<file_sep>filename\n"
            "<fim_prefix>def add(a, b):\n    c =<fim_suffix>\n    return c\n<fim_middle>")
    assert r["prompt"] == want and r["truncated"] is False
    # The same continuation as /completion of those tokens. Each part is
    # tokenized on its own (as llama.cpp does), which can differ from
    # tokenizing the joined text.
    def tok(text, special=False):
        return s.http.post("/tokenize", json={"content": text, "parse_special": special}).json()["tokens"]

    ids = (tok("<file_sep>", True) + tok("util.py\n") + tok("import os\n") + tok("<file_sep>", True) +
           tok("filename\n") + tok("<fim_prefix>", True) + tok(body["input_prefix"]) + tok("c =", True) +
           tok("<fim_suffix>", True) + tok(body["input_suffix"]) + tok("<fim_middle>", True))
    assert r["tokens_evaluated"] == len(ids)
    assert completion(s, prompt=ids, n_predict=6, temperature=0)["content"] == r["content"]
    chunks = stream_chunks(s, body, "/infill")
    assert "".join(c["content"] for c in chunks) == r["content"] and chunks[-1]["stop"] is True
    assert s.http.get("/props").json()["fim"] is True
    # More context than the budget: the prefix keeps its end, the answer says truncated.
    long = post(s, "/infill", {**body, "input_prefix": "x = 1\n" * 200, "n_predict": 4}).json()
    assert long["truncated"] is True and long["tokens_evaluated"] <= 256 - 4
    assert long["prompt"].endswith("x = 1\nc =<fim_suffix>\n    return c\n<fim_middle>")


def test_concurrent_streams_get_distinct_slots(server):
    results = [None] * 3

    def run(i):
        results[i] = stream_chunks(server, {"prompt": PROMPT, "n_predict": 20, "temperature": 0})

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    texts = {"".join(c["content"] for c in r) for r in results}
    assert len(texts) == 1  # greedy: the same text whatever ran beside it
    assert all(0 <= r[-1]["id_slot"] < 4 for r in results)
