"""Multi-LoRA serving through `tokenmill serve` (issue 21): adapters given
with --lora and loaded at run time, picked by `model`, batched with each
other and the base, isolated in the prefix cache by their contents, and
unloaded without losing a request. Adapters come from `tokenmill
synth-lora` for the tiny synthetic model; every expected output is the
same server's answer to the same request alone, never a constant."""
import concurrent.futures
import shutil
import threading
import time

import openai
import pytest

from conftest import run_tokenmill
from test_server_common import Server

PROMPT = "Once upon a time there was"
# Long enough to fill several KV blocks, so that a prefix-cache hit shows.
LONG_PROMPT = " ".join(["the little cat sat on the warm mat and looked at the dog"] * 8)
ADAPTERS = ["a1", "a2", "a3"]


def synth_lora(binary, base, path, seed, strength=1.0):
    run_tokenmill(binary, "synth-lora", "-m", base, "-o", path, "--seed", str(seed), "--strength", str(strength))
    return path


@pytest.fixture(scope="module")
def files(tokenmill_bin, tiny, tmp_path_factory):
    """Adapter files for the tiny model: three different ones, a byte copy of
    the first, two more for reloading a name, and one for another
    architecture."""
    d = tmp_path_factory.mktemp("lora")
    out = {name: synth_lora(tokenmill_bin, tiny, str(d / f"{name}.gguf"), seed)
           for seed, name in enumerate(ADAPTERS + ["x1", "x2"], start=1)}
    out["a1_copy"] = str(d / "a1_copy.gguf")
    shutil.copyfile(out["a1"], out["a1_copy"])
    other_base = str(d / "qwen2.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "qwen2", "--preset", "tiny", "--type", "Q8_0", "--seed", "3",
                  "-o", other_base)
    out["qwen2"] = synth_lora(tokenmill_bin, other_base, str(d / "qwen2_lora.gguf"), 9)
    return out


def lora_flags(files, names):
    flags = []
    for name in names:
        flags += ["--lora", f"{name}={files[name]}"]
    return flags


@pytest.fixture(scope="module")
def server(tokenmill_bin, tiny, files):
    with Server(tokenmill_bin, tiny, *lora_flags(files, ADAPTERS + ["a1_copy"]), "--allow-runtime-lora",
                "--chat-template", "chatml", "-t", "2", "--kv-memory", "32M") as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return server.client()


def complete(client, model, prompt=PROMPT, max_tokens=16):
    r = client.completions.create(model=model, prompt=prompt, max_tokens=max_tokens, temperature=0)
    assert r.model == model
    return r


def text(client, model, prompt=PROMPT, max_tokens=16):
    return complete(client, model, prompt, max_tokens).choices[0].text


def cached(client, model, prompt):
    return complete(client, model, prompt, max_tokens=1).usage.prompt_tokens_details.cached_tokens


def error_of(response):
    return response.json()["error"]


def test_models_lists_adapters_with_their_parent(server, client, files):
    models = {m.id: m for m in client.models.list().data}
    base = "tiny"
    assert base in models
    assert getattr(models[base], "parent", None) is None
    for name in ADAPTERS + ["a1_copy"]:
        card = models[name].model_dump()
        assert card["parent"] == base and card["root"] == files[name], card
        assert card["lora_rank"] > 0
    ids = [m.id for m in client.models.list().data]
    assert ids.index(base) < ids.index("a1"), "adapters come after the base"
    assert client.models.retrieve("a2").model_dump()["parent"] == base
    r = server.http.get("/lora-adapters")
    assert r.status_code == 200
    listed = r.json()
    assert [a["name"] for a in listed] == ADAPTERS + ["a1_copy"]
    assert [a["id"] for a in listed] == list(range(len(listed)))
    assert all(a["scale"] == 1.0 for a in listed)


def test_an_adapter_changes_the_output_deterministically(client):
    base = text(client, "tiny")
    outputs = {name: text(client, name) for name in ADAPTERS}
    for name, out in outputs.items():
        assert out != base, f"{name} generates what the base does"
        assert text(client, name) == out, f"{name} is not deterministic"
    assert len(set(outputs.values())) == len(ADAPTERS), outputs
    # Identical contents under another name: identical output.
    assert text(client, "a1_copy") == outputs["a1"]
    # The base model's name and no name at all both mean the base.
    assert text(client, "tiny") == base


def test_chat_and_llama_cpp_routes_pick_adapters(server, client):
    messages = [{"role": "user", "content": "Tell me about the cat"}]
    chat = {m: client.chat.completions.create(model=m, messages=messages, max_tokens=12, temperature=0)
            for m in ["tiny", "a2"]}
    assert chat["a2"].model == "a2"
    assert chat["a2"].choices[0].message.content != chat["tiny"].choices[0].message.content

    def llama(body):
        r = server.http.post("/completion", json={"prompt": PROMPT, "n_predict": 12, "temperature": 0, **body})
        assert r.status_code == 200, r.text
        return r.json()["content"]

    by_model = llama({"model": "a3"})
    assert by_model != llama({})
    index = [a["name"] for a in server.http.get("/lora-adapters").json()].index("a3")
    assert llama({"lora": [{"id": index, "scale": 1.0}]}) == by_model
    assert llama({"lora": [{"id": index, "scale": 0}]}) == llama({})
    r = server.http.post("/completion", json={"prompt": PROMPT, "lora": [{"id": index, "scale": 0.5}]})
    assert r.status_code == 400 and error_of(r)["param"] == "lora[0]", r.text
    r = server.http.post("/completion", json={"prompt": PROMPT, "lora": [{"id": 99, "scale": 1}]})
    assert r.status_code == 400 and "GET /lora-adapters" in error_of(r)["message"], r.text


def test_embeddings_use_the_adapter(client):
    base = client.embeddings.create(model="tiny", input=PROMPT).data[0].embedding
    adapted = client.embeddings.create(model="a1", input=PROMPT)
    assert adapted.model == "a1"
    assert adapted.data[0].embedding != base


def test_a_mixed_batch_gives_each_request_its_own_tokens(client):
    """Requests for three adapters and the base, all at once (one batch),
    answer what each answers alone."""
    prompts = [PROMPT, "The dog ran to the", LONG_PROMPT[:80]]
    jobs = [(m, p) for m in ["tiny"] + ADAPTERS for p in prompts]
    alone = {job: text(client, *job, max_tokens=24) for job in jobs}
    for _ in range(2):
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
            together = dict(zip(jobs, pool.map(lambda job: text(client, *job, max_tokens=24), jobs)))
        assert together == alone


def hit_tokens(server, adapter):
    return server.metrics().get(f'tokenmill_adapter_prefix_cache_hit_tokens_total{{adapter="{adapter}"}}', 0.0)


def test_prefix_blocks_are_shared_by_contents_only(server, client, files):
    prompt = "prefix isolation: " + LONG_PROMPT
    assert cached(client, "a1", prompt) == 0
    hits_before = hit_tokens(server, "a1")
    assert cached(client, "a1", prompt) > 0, "the same adapter reuses its prefix"
    assert hit_tokens(server, "a1") > hits_before
    # Two adapters (and the base) never share a block.
    assert cached(client, "a2", prompt) == 0
    assert cached(client, "tiny", prompt) == 0
    assert cached(client, "a3", prompt) == 0
    # The same contents under another name do share: the identity is a hash
    # of the tensors, not the name.
    assert cached(client, "a1_copy", prompt) > 0
    # A name reused for other contents starts afresh.
    load = {"lora_name": "reused", "lora_path": files["x1"]}
    assert server.http.post("/v1/load_lora_adapter", json=load).status_code == 200
    assert cached(client, "reused", prompt) == 0
    assert cached(client, "reused", prompt) > 0
    assert server.http.post("/v1/unload_lora_adapter", json={"lora_name": "reused"}).status_code == 200
    load["lora_path"] = files["x2"]
    assert server.http.post("/v1/load_lora_adapter", json=load).status_code == 200
    assert cached(client, "reused", prompt) == 0
    assert server.http.post("/v1/unload_lora_adapter", json={"lora_name": "reused"}).status_code == 200
    m = server.metrics()
    assert m['tokenmill_adapter_prefix_cache_hit_tokens_total{adapter="a1_copy"}'] > 0
    assert m['tokenmill_adapter_prefix_cache_miss_tokens_total{adapter="a2",reason="isolated"}'] > 0


def test_runtime_load_and_unload(server, client, files):
    r = server.http.post("/v1/load_lora_adapter", json={"lora_name": "late", "lora_path": files["x1"]})
    assert r.status_code == 200 and "late" in r.text, r.text
    assert "late" in [m.id for m in client.models.list().data]
    assert text(client, "late") != text(client, "tiny")
    loaded = server.metrics()["tokenmill_lora_adapters_loaded"]
    assert server.http.post("/v1/unload_lora_adapter", json={"lora_name": "late"}).status_code == 200
    assert server.metrics()["tokenmill_lora_adapters_loaded"] == loaded - 1
    assert "late" not in [m.id for m in client.models.list().data]
    with pytest.raises(openai.NotFoundError) as e:
        complete(client, "late")
    assert e.value.body["code"] == "model_not_found"


@pytest.mark.parametrize("body, status, field", [
    ({"lora_path": "x"}, 400, "lora_name"),
    ({"lora_name": "n"}, 400, "lora_path"),
    ({"lora_name": "", "lora_path": "x"}, 400, "lora_name"),
    ({"lora_name": "tiny", "lora_path": "FILE:a1"}, 400, "lora_name"),
    ({"lora_name": "n", "lora_path": "/nonexistent/adapter.gguf"}, 400, "lora_path"),
    ({"lora_name": "n", "lora_path": "FILE:qwen2"}, 400, "lora_path"),
    ({"lora_name": "a1", "lora_path": "FILE:a2"}, 409, "lora_name"),
    ({"lora_name": "n", "lora_path": "FILE:a1", "lora_nmae": 1}, 400, "lora_nmae"),
    ({"lora_name": "n", "lora_path": "FILE:a1", "load_inplace": True}, 400, "load_inplace"),
    ({"lora_name": 5, "lora_path": "FILE:a1"}, 400, "lora_name"),
])
def test_bad_loads_are_refused_clearly(server, files, body, status, field):
    body = {k: files[v[5:]] if isinstance(v, str) and v.startswith("FILE:") else v for k, v in body.items()}
    r = server.http.post("/v1/load_lora_adapter", json=body)
    assert r.status_code == status, r.text
    err = error_of(r)
    assert err["param"] == field, err
    if field == "lora_path" and "lora_path" in body:
        assert body["lora_path"] in err["message"], err  # the file is named
    if body.get("lora_path") == files["qwen2"]:
        assert "qwen2" in err["message"] and "architecture" in err["message"], err
    names = [m["id"] for m in server.http.get("/v1/models").json()["data"]]
    assert "n" not in names


def test_other_bad_requests(server):
    r = server.http.post("/v1/load_lora_adapter", content=b"{not json")
    assert r.status_code == 400
    r = server.http.post("/v1/unload_lora_adapter", json={"lora_name": "never-loaded"})
    assert r.status_code == 404 and error_of(r)["code"] == "lora_not_found", r.text
    r = server.http.post("/v1/unload_lora_adapter", json={})
    assert r.status_code == 400 and error_of(r)["param"] == "lora_name", r.text
    r = server.http.post("/v1/completions", json={"model": "a9", "prompt": "x"})
    assert r.status_code == 404 and error_of(r)["code"] == "model_not_found", r.text
    assert "'a1'" in error_of(r)["message"], "the 404 lists the adapters too"
    r = server.http.get("/v1/models/a9")
    assert r.status_code == 404


def test_metrics_count_adapters_and_their_requests(server, client):
    before = server.metrics()
    complete(client, "a2")
    complete(client, "a2")
    after = server.metrics()
    key = 'tokenmill_adapter_requests_total{adapter="a2"}'
    assert after[key] - before.get(key, 0) == 2
    assert after["tokenmill_lora_adapters_loaded"] == len(ADAPTERS) + 1
    assert after["tokenmill_lora_adapters_draining"] == 0
    assert after['tokenmill_adapter_prefix_cache_miss_tokens_total{adapter="",reason="no_overlap"}'] >= 0


def test_runtime_endpoints_need_the_flag_and_the_key(tokenmill_bin, tiny, files):
    with Server(tokenmill_bin, tiny, "--lora", f"a1={files['a1']}", "--api-key", "k1", "-t", "1") as s:
        r = s.http.post("/v1/load_lora_adapter", json={"lora_name": "b", "lora_path": files["a2"]},
                        headers={"Authorization": "Bearer k1"})
        assert r.status_code == 403, r.text
        assert "--allow-runtime-lora" in error_of(r)["message"]
        r = s.http.post("/v1/unload_lora_adapter", json={"lora_name": "a1"}, headers={"Authorization": "Bearer k1"})
        assert r.status_code == 403, r.text
        # Adapters given at start-up serve as usual.
        assert s.client(api_key="k1").completions.create(model="a1", prompt=PROMPT, max_tokens=2).model == "a1"
    with Server(tokenmill_bin, tiny, "--allow-runtime-lora", "--api-key", "k1", "-t", "1") as s:
        body = {"lora_name": "b", "lora_path": files["a2"]}
        r = s.http.post("/v1/load_lora_adapter", json=body)
        assert r.status_code == 401, r.text
        r = s.http.post("/v1/load_lora_adapter", json=body, headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401, r.text
        r = s.http.post("/v1/load_lora_adapter", json=body, headers={"Authorization": "Bearer k1"})
        assert r.status_code == 200, r.text


def test_max_loras_bounds_resident_adapters(tokenmill_bin, tiny, files):
    with Server(tokenmill_bin, tiny, *lora_flags(files, ["a1", "a2"]), "--max-loras", "2",
                "--allow-runtime-lora", "-t", "1") as s:
        load = {"lora_name": "a3", "lora_path": files["a3"]}
        r = s.http.post("/v1/load_lora_adapter", json=load)
        assert r.status_code == 409, r.text
        assert error_of(r)["code"] == "max_loras_reached" and "--max-loras" in error_of(r)["message"]
        assert s.http.post("/v1/unload_lora_adapter", json={"lora_name": "a1"}).status_code == 200
        r = s.http.post("/v1/load_lora_adapter", json=load)
        assert r.status_code == 200, r.text
    proc = run_tokenmill(tokenmill_bin, "serve", "-m", tiny, "--port", "0", "--max-loras", "1",
                         *lora_flags(files, ["a1", "a2"]), check=False, timeout=60)
    assert proc.returncode != 0 and "--max-loras" in proc.stderr, proc.stderr


@pytest.mark.parametrize("flag, named", [
    ("bad=/nonexistent/dir/adapter.gguf", "/nonexistent/dir/adapter.gguf"),
    ("BASE", None),  # the base model file itself: not an adapter
    ("QWEN", None),  # an adapter for another architecture
    ("no-equals-sign", "NAME=FILE"),
])
def test_serve_refuses_a_bad_lora_at_start(tokenmill_bin, tiny, files, flag, named):
    if flag == "BASE":
        flag, named = f"b={tiny}", tiny
    if flag == "QWEN":
        flag, named = f"q={files['qwen2']}", files["qwen2"]
    proc = run_tokenmill(tokenmill_bin, "serve", "-m", tiny, "--port", "0", "--lora", flag, check=False, timeout=60)
    assert proc.returncode != 0
    assert named in proc.stderr, proc.stderr


def stream_once(client, model, max_tokens):
    """One streamed completion: ('ok', text, finish_reason) or ('404', ...)."""
    pieces, finish = [], None
    try:
        stream = client.completions.create(model=model, prompt=PROMPT, max_tokens=max_tokens, temperature=0,
                                           stream=True)
        for chunk in stream:
            if chunk.choices:
                pieces.append(chunk.choices[0].text)
                finish = chunk.choices[0].finish_reason or finish
    except openai.NotFoundError as e:
        assert not pieces, "a 404 after tokens were streamed"
        return "404", e.body["code"], None
    return "ok", "".join(pieces), finish


def test_unload_and_reload_under_load_lose_no_request(tokenmill_bin, slow, tmp_path_factory):
    """Clients stream on adapter A while A is unloaded, loaded again and B
    is loaded: every request completes with A's output, or is refused with
    404 when it was sent while A was out of the table; none hangs or
    breaks mid-stream. Runs on the slow model so that requests are still
    streaming when A is unloaded (drain)."""
    d = tmp_path_factory.mktemp("lora_slow")
    a = synth_lora(tokenmill_bin, slow, str(d / "a.gguf"), 11)
    b = synth_lora(tokenmill_bin, slow, str(d / "b.gguf"), 12)
    max_tokens = 40
    # One compute thread: the test runs beside other suites, and two
    # spinning threads on a loaded machine made each request take 30 s
    # under ASan (the loop below then ran out of time). One sequence at a
    # time and no prefix cache: every request then runs the very products
    # the expected one ran. Batched beside others (or prefilling only the
    # tail the cache lacks), a row can take another kernel path (decode
    # tiles against a packed GEMM, with thresholds that differ between AVX2
    # and AVX-512) and greedy decoding can flip at a near-tie:
    # on an AVX-512 machine 1 run in 3 failed that way, with no adapter
    # change at all. The requests still queue, stream and drain across the
    # unload and reload.
    with Server(tokenmill_bin, slow, "--lora", f"A={a}", "--allow-runtime-lora", "-t", "1", "--max-seqs", "1",
                "--no-prefix-cache") as s:
        client = s.client()
        expected = stream_once(client, "A", max_tokens)
        assert expected[0] == "ok" and expected[2] == "length"
        assert expected[1] != stream_once(client, "slow", max_tokens)[1]
        results, stop = [], threading.Event()
        lock = threading.Lock()

        def worker():
            while not stop.is_set():
                sent = time.monotonic()
                outcome = stream_once(client, "A", max_tokens)
                with lock:
                    results.append((sent, time.monotonic(), outcome))

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        t_unload = time.monotonic()
        assert s.http.post("/v1/unload_lora_adapter", json={"lora_name": "A"}).status_code == 200
        t_unloaded = time.monotonic()
        time.sleep(0.5)
        t_reload = time.monotonic()
        assert s.http.post("/v1/load_lora_adapter", json={"lora_name": "A", "lora_path": a}).status_code == 200
        t_reloaded = time.monotonic()
        assert s.http.post("/v1/load_lora_adapter", json={"lora_name": "B", "lora_path": b}).status_code == 200
        # Keep the load on until a request sent after the reload has finished
        # (seconds under a sanitizer, where each request is slow).
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with lock:
                if any(sent > t_reloaded and o[0] == "ok" for sent, _, o in results):
                    break
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join(timeout=180)
            assert not t.is_alive(), "a client hangs"
        assert s.http.get("/health").status_code == 200
        assert s.metrics()["tokenmill_lora_adapters_draining"] == 0

    refused = [(sent, end, o) for sent, end, o in results if o[0] == "404"]
    done = [(sent, end, o) for sent, end, o in results if o[0] == "ok"]
    assert len(refused) + len(done) == len(results)
    for sent, end, o in refused:
        assert o[1] == "model_not_found"
        # Answered after the unload began, sent before the reload ended.
        assert end >= t_unload and sent <= t_reloaded, "a 404 for a request sent while A was loaded"
    for sent, end, o in done:
        assert o[1:] == expected[1:], "a request finished with other tokens than A's"
        assert not (t_unloaded <= sent and end <= t_reload), "a request sent after the unload was served"
    # The unload happened while requests were streaming, and they finished.
    assert any(sent < t_unload and end > t_unloaded for sent, end, _ in done), "nothing was in flight"
    assert any(sent > t_reloaded for sent, _, _ in done), "nothing was served after the reload"
