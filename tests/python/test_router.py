"""`tokenmill route` in front of two real `tokenmill serve` replicas on a
tiny synthetic model: the official openai client through the router
(completions, chat, streams), prefix affinity measured on the replicas'
prefix caches against round-robin, a replica killed with SIGKILL while
requests run, load bounds under concurrency, --spawn, and clear errors for
bad flags and for no replica up."""
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from conftest import SANITIZER_MARKERS, run_tokenmill
from test_server_common import Http, LoggedProcess, Server, parse_metrics, sse_events

HIT = "tokenmill_prefix_cache_hit_tokens_total"
FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_openai_server.py")
SERVE_ARGS = ("--chat-template", "chatml", "-t", "1", "--kv-memory", "32M", "--quiet")


@pytest.fixture(scope="module")
def tiny(tokenmill_bin, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("models") / "tiny.gguf")
    # A longer context than the preset's 256, for prompts with ~450-byte shared prefixes.
    run_tokenmill(tokenmill_bin, "synth", "--arch", "llama", "--preset", "tiny", "--type", "Q8_0",
                  "--seed", "3", "--ctx", "2048", "-o", path)
    return path


class Router(LoggedProcess):
    """A `tokenmill route` process on a free port (read from its "listening"
    event); stderr (its JSON log, and spawned replicas' logs) to a file."""

    def __init__(self, binary, *args, timeout=60):
        self.log_file = tempfile.NamedTemporaryFile("w+", prefix="tokenmill-route-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([binary, "route", "--port", "0", *args], stdout=subprocess.DEVNULL,
                                     stderr=self.log_file)
        self.base = None
        deadline = time.time() + timeout
        while self.base is None:
            # Spawned replicas log "listening" on the same stderr; the router's names its policy.
            self.base = next((e["url"] for e in self.events() if e.get("event") == "listening" and "policy" in e),
                             None)
            if self.proc.poll() is not None:
                raise AssertionError(f"tokenmill route exited with {self.proc.returncode}:\n{self.log_text()}")
            if time.time() > deadline:
                self.kill()
                raise AssertionError(f"tokenmill route did not start listening:\n{self.log_text()}")
            time.sleep(0.02)
        self.http = Http(self.base)

    def client(self, **kw):
        import openai
        return openai.OpenAI(base_url=self.base + "/v1", api_key="router-test", max_retries=0, timeout=60, **kw)

    def metrics(self):
        r = self.http.get("/metrics")
        assert r.status_code == 200, r.text
        return parse_metrics(r.text)

    def routed(self, url):
        return self.metrics()[f'tokenmill_router_requests_total{{replica="{url}"}}']

    def __exit__(self, exc_type, *exc):
        status = None
        if exc_type is None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            status = self.proc.wait(timeout=60)
        log = self.log_text()
        self.kill()
        if exc_type is None:
            assert not [m for m in SANITIZER_MARKERS if m in log], log[-6000:]
            assert status in (None, 0), f"tokenmill route exit status {status} after SIGTERM:\n{log[-3000:]}"


@pytest.fixture(scope="module")
def replicas(tokenmill_bin, tiny):
    with Server(tokenmill_bin, tiny, *SERVE_ARGS) as a, Server(tokenmill_bin, tiny, *SERVE_ARGS) as b:
        yield [a, b]


def route_args(replicas, policy, *extra):
    args = ["--policy", policy, "--poll-ms", "100"]
    for r in replicas:
        args += ["--replica", r.base]
    return [*args, *extra]


def words(rng, n):
    vocab = ["alpha", "river", "stone", "cloud", "maple", "quartz", "lantern", "harbor", "violet", "ember",
             "summit", "meadow", "falcon", "copper", "willow", "thunder"]
    return " ".join(rng.choice(vocab) for _ in range(n))


def test_openai_client_through_the_router(tokenmill_bin, replicas):
    direct = replicas[0].client()
    with Router(tokenmill_bin, *route_args(replicas, "affinity")) as router:
        client = router.client()
        assert sorted(m.id for m in client.models.list().data) == ["tiny"]
        health = router.http.get("/health").json()
        assert health["status"] == "ok" and health["replicas_up"] == 2 and health["policy"] == "affinity"

        want = direct.completions.create(model="tiny", prompt="hello world", max_tokens=12, temperature=0)
        got = client.completions.create(model="tiny", prompt="hello world", max_tokens=12, temperature=0)
        assert got.choices[0].text == want.choices[0].text
        assert got.usage.completion_tokens == want.usage.completion_tokens

        chunks = list(client.completions.create(model="tiny", prompt="hello world", max_tokens=12, temperature=0,
                                                stream=True, stream_options={"include_usage": True}))
        assert "".join(c.choices[0].text for c in chunks if c.choices) == want.choices[0].text
        assert chunks[-1].usage.completion_tokens == want.usage.completion_tokens

        msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi there"}]
        want = direct.chat.completions.create(model="tiny", messages=msgs, max_tokens=10, temperature=0)
        got = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=10, temperature=0)
        assert got.choices[0].message.content == want.choices[0].message.content
        chunks = list(client.chat.completions.create(model="tiny", messages=msgs, max_tokens=10, temperature=0,
                                                     stream=True))
        assert chunks[0].choices[0].delta.role == "assistant"
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == want.choices[0].message.content

        # Errors pass through with the replica's status and body.
        import openai
        with pytest.raises(openai.BadRequestError):
            client.completions.create(model="tiny", prompt="x", max_tokens=4, top_p=7)
        r = router.http.post("/v1/completions", json={"prompt": "x", "max_tokens": 3},
                             headers={"X-Request-Id": "rid-123", "X-Tenant": "acme"})
        assert r.status_code == 200 and r.headers["x-request-id"] == "rid-123"
        assert r.headers["x-tokenmill-replica"] in (replicas[0].base, replicas[1].base)
        assert router.http.get("/nope").status_code == 404

        m = router.metrics()
        assert sum(m[f'tokenmill_router_requests_total{{replica="{r.base}"}}'] for r in replicas) == 7
        assert all(m[f'tokenmill_router_replica_up{{replica="{r.base}"}}'] == 1 for r in replicas)
        assert m['tokenmill_router_info{policy="affinity"}'] == 1


def raw_chunks(base, path, body):
    """POSTs over a raw socket and returns (head, [chunk payloads]) as they
    came in the chunked encoding: the framing curl and http.client undo."""
    host, port = base.split("//")[1].split(":")
    data = json.dumps(body).encode()
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    head, _, rest = raw.decode().partition("\r\n\r\n")
    chunks = []
    while rest:
        size, _, rest = rest.partition("\r\n")
        n = int(size, 16)
        if n == 0:
            break
        chunks.append(rest[:n])
        rest = rest[n + 2:]
    return head, chunks


def test_streams_pass_through_chunk_by_chunk(tokenmill_bin, replicas):
    body = {"prompt": "hello", "max_tokens": 8, "stream": True, "temperature": 0, "ignore_eos": True}
    with Router(tokenmill_bin, *route_args(replicas, "round-robin")) as router:
        head, chunks = raw_chunks(router.base, "/v1/completions", body)
    assert head.startswith("HTTP/1.1 200")
    assert "content-type: text/event-stream" in head.lower() and "transfer-encoding: chunked" in head.lower()
    # One HTTP chunk per event, as the replica wrote them: nothing gathered
    # or split on the way.
    assert all(c.endswith("\n\n") for c in chunks), chunks
    events = [e for c in chunks for e in sse_events(c)]
    assert events[-1] == "[DONE]" and len(events) == 8 + 2  # 8 tokens, the finish chunk, [DONE]
    assert len(chunks) == len(events)


def send_prefix_traffic(router, prefixes, per_prefix, seed):
    """Sequential completions: every prefix `per_prefix` times with distinct
    suffixes, in a shuffled fixed-seed order."""
    rng = random.Random(seed)
    jobs = [(p, i) for p in range(len(prefixes)) for i in range(per_prefix)]
    rng.shuffle(jobs)
    client = router.client()
    for p, i in jobs:
        r = client.completions.create(model="tiny", prompt=f"{prefixes[p]} question {i}: {words(rng, 3)}",
                                      max_tokens=2, temperature=0)
        assert r.choices[0].finish_reason in ("stop", "length")


def cache_hits(replicas):
    # Summed over the tenant label (one series per tenant).
    return sum(v for r in replicas for k, v in r.metrics().items() if k.split("{")[0] == HIT)


def test_affinity_keeps_prefix_caches_warm(tokenmill_bin, replicas):
    hits = {}
    for policy in ("affinity", "round-robin"):
        rng = random.Random(f"prefixes-{policy}")  # fresh prefixes: nothing cached from the other run
        prefixes = [f"[{policy} {k}] " + words(rng, 70) for k in range(8)]
        with Router(tokenmill_bin, *route_args(replicas, policy)) as router:
            before = cache_hits(replicas)
            send_prefix_traffic(router, prefixes, per_prefix=4, seed=7)
            hits[policy] = cache_hits(replicas) - before
            if policy == "affinity":
                m = router.metrics()
                assert sum(m[f'tokenmill_router_affinity_hits_total{{replica="{r.base}"}}'] for r in replicas) == 32
    print(f"\nprefix-cache hit tokens over 32 requests (8 prefixes x 4): affinity {hits['affinity']:.0f}, "
          f"round-robin {hits['round-robin']:.0f}")
    assert hits["affinity"] > hits["round-robin"] * 1.2, hits


def run_concurrently(fn, n, timeout=60):
    """fn(0..n-1) on n threads that start their requests together: on a
    loaded machine, threads started one by one can each finish before the
    next begins, and the routers then never see concurrent load."""
    results, threads = [None] * n, []
    start = threading.Barrier(n)

    def one(i):
        try:
            start.wait(timeout)
            results[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - reported below
            results[i] = e

    for i in range(n):
        t = threading.Thread(target=one, args=(i,), daemon=True)
        t.start()
        threads.append(t)
    deadline = time.time() + timeout
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.time()))
    assert not any(t.is_alive() for t in threads), "a request hung"
    failed = [r for r in results if isinstance(r, Exception)]
    assert not failed, failed[:3]
    return results


def test_load_stays_bounded_under_concurrency(tokenmill_bin, replicas):
    n = 48
    # least-load over distinct prompts: the two replicas share the work.
    with Router(tokenmill_bin, *route_args(replicas, "least-load")) as router:
        client = router.client()
        before = [router.routed(r.base) for r in replicas]
        run_concurrently(lambda i: client.completions.create(
            model="tiny", prompt=f"prompt {i} " + "x" * (i % 5), max_tokens=32, extra_body={"ignore_eos": True}), n)
        counts = [router.routed(r.base) - b for r, b in zip(replicas, before)]
        print(f"\nleast-load routed {counts}")
        assert sum(counts) == n and min(counts) >= n * 0.25, counts
    # affinity with one hot prefix: bounded load diverts the overflow.
    with Router(tokenmill_bin, *route_args(replicas, "affinity")) as router:
        client = router.client()
        before = [router.routed(r.base) for r in replicas]
        hot = "the same system prompt for everyone " * 10
        run_concurrently(lambda i: client.completions.create(
            model="tiny", prompt=f"{hot} user {i}", max_tokens=32, extra_body={"ignore_eos": True}), n)
        counts = [router.routed(r.base) - b for r, b in zip(replicas, before)]
        m = router.metrics()
        diverted = sum(m[f'tokenmill_router_affinity_diverted_total{{replica="{r.base}"}}'] for r in replicas)
        print(f"affinity (one hot prefix) routed {counts}, diverted {diverted:.0f}")
        assert sum(counts) == n and diverted > 0 and min(counts) >= n * 0.1, counts


def one_request(base, i, stream):
    """One request over raw HTTP, classified: "ok" (complete answer), or
    "error: ..." (an HTTP error in OpenAI shape, or a stream that ended with
    an error event and [DONE]). Anything else (a stream cut without either,
    a non-error body without a finish) fails the test: a lost request."""
    body = {"prompt": f"request {i} " + "y" * (i % 7), "max_tokens": 48, "stream": stream, "ignore_eos": True}
    r = Http(base, timeout=30).post("/v1/completions", json=body)
    if r.status_code != 200:
        err = r.json()["error"]
        assert err["message"], r.text
        return f"error: HTTP {r.status_code} {err['message']}"
    if not stream:
        assert r.json()["choices"][0]["finish_reason"] == "length", r.text
        return "ok"
    events = sse_events(r.text)
    assert events[-1] == "[DONE]", r.text[-500:]
    last = json.loads(events[-2])
    if "error" in last:
        assert last["error"]["message"], last
        return f"error: stream {last['error']['message']}"
    assert any(json.loads(e)["choices"] and json.loads(e)["choices"][0]["finish_reason"] == "length"
               for e in events[:-1]), r.text[-500:]
    return "ok"


def test_replica_killed_mid_traffic(tokenmill_bin, tiny):
    with Server(tokenmill_bin, tiny, *SERVE_ARGS) as a:
        b = Server(tokenmill_bin, tiny, *SERVE_ARGS)
        try:
            with Router(tokenmill_bin, *route_args([a, b], "least-load")) as router:
                outcomes, stop = [], threading.Event()

                def worker(w):
                    i = 0
                    while not stop.is_set():
                        try:
                            outcomes.append(one_request(router.base, w * 1000 + i, stream=(i + w) % 2 == 0))
                        except Exception as e:  # noqa: BLE001 - a lost or hung request: fails below
                            outcomes.append(f"LOST: {e!r}")
                        i += 1

                threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(6)]
                for t in threads:
                    t.start()
                time.sleep(1.0)
                b.proc.kill()  # SIGKILL while requests run on it
                time.sleep(1.5)
                stop.set()
                for t in threads:
                    t.join(timeout=60)
                assert not any(t.is_alive() for t in threads), "a request hung"
                assert not [o for o in outcomes if o.startswith("LOST")], outcomes
                errors = [o for o in outcomes if o != "ok"]
                m = router.metrics()
                fails = m[f'tokenmill_router_failures_total{{replica="{b.base}"}}']
                retries = m[f'tokenmill_router_retries_total{{replica="{b.base}"}}']
                print(f"\nkill mid-traffic: {len(outcomes)} requests, {len(outcomes) - len(errors)} ok, "
                      f"{len(errors)} clear errors {errors[:2]}; on the killed replica {fails:.0f} failures, "
                      f"{retries:.0f} retried elsewhere")
                assert len(outcomes) > 12
                # Afterwards: the dead one is out and everything succeeds on the survivor.
                assert m[f'tokenmill_router_replica_up{{replica="{b.base}"}}'] == 0
                assert m[f'tokenmill_router_failures_total{{replica="{b.base}"}}'] >= 1
                before = router.routed(a.base)
                after = [one_request(router.base, 90000 + i, stream=i % 2 == 0) for i in range(8)]
                assert after == ["ok"] * 8, after
                assert router.routed(a.base) - before == 8
                assert router.http.get("/health").json()["replicas_up"] == 1
        finally:
            b.kill()


class FakeReplica:
    """fake_openai_server.py: a replica whose stream pace and stalls the test sets."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([sys.executable, FAKE, "--port", "0", *args], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), line
        self.base = f"http://127.0.0.1:{int(line.split()[1])}"
        self.http = Http(self.base)

    def metrics(self):
        return parse_metrics(self.http.get("/metrics").text)

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def wait_until(predicate, timeout=10.0):
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_client_disconnect_cancels_the_upstream_stream(tokenmill_bin):
    fake = FakeReplica("--ttft-ms", "10", "--itl-ms", "50")
    try:
        with Router(tokenmill_bin, "--replica", fake.base, "--poll-ms", "100") as router:
            host, port = router.base.split("//")[1].split(":")
            data = json.dumps({"prompt": "hi", "max_tokens": 400, "stream": True}).encode()
            with socket.create_connection((host, int(port)), timeout=10) as s:
                s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
                got = b""
                while got.count(b"data: ") < 3:
                    got += s.recv(4096)
            # The client left after 3 of 400 tokens (20 s at 50 ms each): the
            # router notices at its next write and cuts the replica's stream.
            wait_until(lambda: fake.metrics()["fake_client_disconnects_total"] == 1, timeout=5)
            wait_until(lambda: router.metrics()["tokenmill_router_client_disconnects_total"] == 1, timeout=5)
            assert router.metrics()[f'tokenmill_router_in_flight{{replica="{fake.base}"}}'] == 0
    finally:
        fake.close()


def test_timeouts_end_requests_with_clear_errors(tokenmill_bin):
    fake = FakeReplica("--ttft-ms", "10", "--itl-ms", "5", "--stall-every", "1")
    try:
        with Router(tokenmill_bin, "--replica", fake.base, "--poll-ms", "100", "--stream-idle-timeout", "1",
                    "--read-timeout", "1") as router:
            # A whole answer slower than --read-timeout (400 x 5 ms): a 502
            # naming the replica and the error (no other replica to retry on).
            t0 = time.time()
            r = router.http.post("/v1/completions", json={"prompt": "hi", "max_tokens": 400})
            assert r.status_code == 502 and r.json()["error"]["code"] == "replica_failed", r.text
            assert fake.base in r.json()["error"]["message"] and "timed out" in r.json()["error"]["message"]
            assert time.time() - t0 < 5
            # Marked down by the failure; the health checks bring it back.
            wait_until(lambda: router.http.get("/health").status_code == 200, timeout=5)
            # A stream that stalls half-way (the fake sleeps an hour): after
            # --stream-idle-timeout it ends with an error event and [DONE].
            r = router.http.post("/v1/completions", json={"prompt": "hi", "max_tokens": 20, "stream": True})
            events = sse_events(r.text)
            assert events[-1] == "[DONE]" and len(events) == 10 + 2, events
            err = json.loads(events[-2])["error"]
            assert "failed mid-stream" in err["message"] and err["code"] == "replica_failed", err
            assert time.time() - t0 < 15
    finally:
        fake.close()


def test_no_replica_up_is_a_clear_503(tokenmill_bin):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    with Router(tokenmill_bin, "--replica", f"http://127.0.0.1:{port}", "--poll-ms", "100") as router:
        r = router.http.post("/v1/completions", json={"prompt": "x", "max_tokens": 2})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json()["error"]["code"] == "no_replica" and "no replica is up" in r.json()["error"]["message"]
        assert router.http.get("/health").status_code == 503


def test_spawn_starts_and_stops_replicas(tokenmill_bin, tiny):
    router = Router(tokenmill_bin, "--spawn", "2", "--", "-m", tiny, *SERVE_ARGS, timeout=120)
    try:
        spawned = [e for e in router.events() if e.get("event") == "replica_spawned"]
        assert len(spawned) == 2
        assert router.http.get("/health").json()["replicas_up"] == 2
        r = router.client().completions.create(model="tiny", prompt="hello", max_tokens=4)
        assert r.choices[0].finish_reason in ("stop", "length")
        router.proc.send_signal(signal.SIGTERM)
        assert router.proc.wait(timeout=60) == 0
        for e in spawned:  # the children are gone with it
            with pytest.raises(OSError):
                Http(e["url"], timeout=2).get("/health")
    finally:
        router.kill()


@pytest.mark.parametrize("args,needle", [
    ([], "no replicas"),
    (["--replica", "127.0.0.1:8081"], "use http://host:port"),
    (["--replica", "http://127.0.0.1:8081", "--spawn", "2", "--", "-m", "x.gguf"], "cannot be combined"),
    (["--replica", "http://127.0.0.1:8081", "--replica", "http://127.0.0.1:8081/"], "given twice"),
    (["--replica", "http://127.0.0.1:8081", "--policy", "random"], "--policy 'random'"),
    (["--spawn", "2"], "needs the serve args"),
    (["--spawn", "1", "--", "-m", "x.gguf", "--port", "9"], "must not set --port"),
])
def test_bad_flags_give_clear_errors(tokenmill_bin, args, needle):
    p = subprocess.run([tokenmill_bin, "route", "--port", "0", *args], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and needle in p.stderr, p.stderr
