"""`tokenmill bench serve` and `bench compare` end to end against a fake
OpenAI-compatible server whose delays are known and which reports when it
actually received each request and sent each token, so what the driver
measures can be checked against the truth, on a loaded machine too: TTFT and
TPOT at 1 and 64 concurrent streams, open-loop arrival rates, failure
classes, prefix-cache accounting, byte-identical plans, spec errors that name
the field, and tickets."""
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
import yaml

from conftest import run_tokenmill

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_openai_server.py")


class FakeServer:
    def __init__(self, *args):
        self.proc = subprocess.Popen([sys.executable, FAKE, "--port", "0", *args], stdout=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), line
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def cpu_s(self):
        """CPU seconds the server process has used (user + system)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def fake():
    servers = []

    def start(*args):
        s = FakeServer(*args)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


def write_spec(tmp_path, name="spec.yaml", **sections):
    spec = {"inference_benchmark": "test"}
    spec.update(sections)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def bench_serve(binary, spec, url, out, *extra, check=True):
    return run_tokenmill(binary, "bench", "serve", spec, "--url", url, "-o", str(out), *extra, check=check,
                         timeout=300)


def load_report(out):
    with open(os.path.join(out, "report.json")) as f:
        return json.load(f)


def records(out):
    with open(os.path.join(out, "records.jsonl")) as f:
        return [json.loads(line) for line in f]


def server_timings(server):
    """What the fake server observed of each streamed request (its clock)."""
    with urllib.request.urlopen(server.url + "/debug/timings", timeout=10) as f:
        return json.load(f)["requests"]


def paired_latencies(out, server):
    """Per ok request, the client's TTFT and TPOT (from records.jsonl) beside
    the server's own for the same request, matched through the plan's prompt.
    Server TTFT: request read -> first chunk written; server TPOT: first ->
    last chunk written over the gaps."""
    with open(os.path.join(out, "plan.jsonl")) as f:
        prompts = {(p["cell"], p["index"]): p["prompt"] for p in map(json.loads, f)}
    seen = {}
    for t in server_timings(server):
        seen.setdefault(t["prompt"], []).append(t)
    pairs = []
    for r in records(out):
        if r["status"] != "ok":
            continue
        [t] = seen[prompts[(r["cell"], r["index"])]]  # prompts are unique in these plans
        assert len(t["chunk_ms"]) == r["output_tokens"] == len(r["chunk_ms"]), (t, r)
        n = r["output_tokens"]
        pairs.append({"client_ttft": r["first_token_ms"] - r["send_ms"],
                      "server_ttft": t["chunk_ms"][0] - t["received_ms"],
                      "client_tpot": (r["chunk_ms"][-1] - r["first_token_ms"]) / (n - 1),
                      "server_tpot": (t["chunk_ms"][-1] - t["chunk_ms"][0]) / (n - 1)})
    return pairs


def percentile(values, q):
    """As the report computes it (bench/stats.cc): linear between ranks."""
    v = sorted(values)
    h = (len(v) - 1) * q
    lo = int(h)
    return v[-1] if lo + 1 >= len(v) else v[lo] + (h - lo) * (v[lo + 1] - v[lo])


# Slack for two stamps of the same monotonic clock taken by two processes
# (milliseconds as doubles): far below any real delay.
CLOCK_EPS_MS = 0.1
# Median client TPOT minus the server's, per request: measured within
# +-0.02 ms, idle and beside 3-4 CPU burners (load 5-9 on 2 cores): TPOT
# spans 9-11 gaps, so the client's delivery delays divide out. Bound 1 ms,
# below what a token count off by one does (-2.5 ms at 25 ms per token).
TPOT_TOL_MS = 1.0


def check_latencies(report, pairs, ttft_ms, itl_ms, overhead_ms):
    """The driver's TTFT and TPOT against the server's own timings of the
    same requests. Load stretches both sides alike, so only what the client
    adds is bounded:
    * per request, client TTFT >= server TTFT (the request was sent before
      the server read it, and the first chunk written before the client
      read it), so a TTFT taken at the response headers fails;
    * the median client overhead (client - server TTFT) is below
      overhead_ms, so a TTFT taken at a later chunk or counted twice fails;
    * the median client TPOT is within TPOT_TOL_MS of the server's, so a
      token count off by one or counted twice fails;
    * the report's percentiles are those of the per-request records;
    * the configured delays are lower bounds (the server sleeps at least
      that long) whatever the load."""
    ttft, tpot = report["overall"]["latency_ms"]["ttft"], report["overall"]["latency_ms"]["tpot"]
    assert len(pairs) == report["overall"]["requests"]["ok"]
    for p in pairs:
        assert p["client_ttft"] >= p["server_ttft"] - CLOCK_EPS_MS, p
        assert p["server_ttft"] >= ttft_ms - CLOCK_EPS_MS and p["server_tpot"] >= itl_ms - CLOCK_EPS_MS, p
    overhead = statistics.median(p["client_ttft"] - p["server_ttft"] for p in pairs)
    tpot_diff = statistics.median(p["client_tpot"] - p["server_tpot"] for p in pairs)
    print(f"\nTTFT p50 {ttft['p50']:.2f} ms, client overhead median {overhead:.2f} ms (max "
          f"{max(p['client_ttft'] - p['server_ttft'] for p in pairs):.2f}); TPOT p50 {tpot['p50']:.2f} ms, client "
          f"minus server median {tpot_diff:+.3f} ms")
    assert overhead < overhead_ms, overhead
    assert abs(tpot_diff) < TPOT_TOL_MS, tpot_diff
    for q, key in ((0.5, "p50"), (0.99, "p99")):
        assert ttft[key] == pytest.approx(percentile([p["client_ttft"] for p in pairs], q), abs=1e-6), ttft
        assert tpot[key] == pytest.approx(percentile([p["client_tpot"] for p in pairs], q), abs=1e-6), tpot
    assert ttft["p50"] >= ttft_ms and tpot["p50"] >= itl_ms - TPOT_TOL_MS, (ttft, tpot)


def test_measures_known_ttft_and_tpot_and_writes_everything(tokenmill_bin, fake, tmp_path):
    server = fake("--ttft-ms", "120", "--itl-ms", "25")
    spec = write_spec(tmp_path,
                      traffic={"concurrency": [1, 4], "arrival": "closed_loop", "requests_per_cell": 10,
                               "length_buckets": [[20, 60], [61, 120]], "output_buckets": [[10, 10]]},
                      controls={"warmup_requests": 2, "random_seed": 3},
                      cost={"usd_per_hour": 3.6}, slo={"ttft_ms": 1000},
                      report=["ttft_ms", "tpot_ms", "p99_ms", "cost_per_success"])
    out = tmp_path / "out"
    bench_serve(tokenmill_bin, spec, server.url, out)
    r = load_report(out)
    o = r["overall"]
    assert o["requests"]["sent"] == 20 and o["requests"]["ok"] == 20
    assert r["warmup"]["requests"] == 2
    # The server sleeps 120 ms before the first token and 25 ms between
    # tokens. What the client adds to TTFT measured 0.3-0.6 ms in the median
    # (idle and beside 3-4 CPU burners); bound 10 ms, below Nagle's 40 ms,
    # TTFT at the last chunk (+225 ms) or counted twice (+120 ms).
    check_latencies(r, paired_latencies(out, server), 120, 25, overhead_ms=10)
    assert o["tokens"]["output"] == 200  # 20 requests x 10 tokens, from usage
    # Exact prompt lengths: the server's own count equals the planned one.
    for rec in records(out):
        assert rec["prompt_tokens"] == rec["planned_input_tokens"], rec
        assert rec["status"] == "ok"
    # Every cell and bucket is reported; throughput names all four rates.
    keys = {c["key"] for c in r["cells"]}
    assert keys == {"c1_h0_all", "c1_h0_b0", "c1_h0_b1", "c4_h0_all", "c4_h0_b0", "c4_h0_b1"}
    for name in ("req_per_s", "input_tok_per_s", "output_tok_per_s", "total_tok_per_s"):
        assert o["throughput"][name] > 0
    # Four clients run four streams at once: about 4x the output rate.
    c1 = next(c for c in r["cells"] if c["key"] == "c1_h0_all")["throughput"]["output_tok_per_s"]
    c4 = next(c for c in r["cells"] if c["key"] == "c4_h0_all")["throughput"]["output_tok_per_s"]
    assert 2.0 < c4 / c1 < 4.5, (c1, c4)
    assert o["server"]["memory_high_water_bytes"] >= 100_000_000  # from /metrics
    assert o["cost"]["per_success_usd"] == pytest.approx(3.6 / 3600 * o["throughput"]["window_s"] / 20)
    assert set(r["headline"]) == {"ttft_ms", "tpot_ms", "p99_ms", "cost_per_success"}
    md = (out / "report.md").read_text()
    assert "**Bottleneck overall: decode.**" in md  # 9 x 25 ms of decode > 120 ms of prefill
    assert "| c=4 h=0 in 61-120 |" in md
    if subprocess.run(["sh", "-c", "command -v gnuplot"], capture_output=True).returncode == 0:
        for plot in ("ttft_cdf.svg", "tpot_cdf.svg", "latency_vs_throughput.svg"):
            assert (out / "plots" / plot).stat().st_size > 1000
            assert f"plots/{plot}" in md


def test_64_concurrent_streams_are_timed_accurately(tokenmill_bin, fake, tmp_path):
    server = fake("--ttft-ms", "300", "--itl-ms", "40")
    spec = write_spec(tmp_path,
                      traffic={"concurrency": [64], "arrival": "closed_loop", "requests_per_cell": 128,
                               "length_buckets": [[16, 32]], "output_buckets": [[12, 12]]},
                      prompts={"token_counter": "words"})
    out = tmp_path / "out"
    server_cpu0 = server.cpu_s()
    bench_serve(tokenmill_bin, spec, server.url, out)
    server_cpu = server.cpu_s() - server_cpu0
    r = load_report(out)
    o = r["overall"]
    assert o["requests"]["ok"] == 128
    assert r["client"]["client_threads_max"] == 64
    # Client minus server TTFT here also holds the Python server's delay in
    # reading 64 requests that arrive at once (accepts, the GIL): medians
    # measured 1.7-10.5 ms idle and 7-21 ms beside 3-4 CPU burners. Bound
    # 50 ms, below TTFT at the last chunk (+440 ms) or counted twice (+300).
    check_latencies(r, paired_latencies(out, server), 300, 40, overhead_ms=50)
    c = r["client"]
    print(f"client: CPU {c['cpu_s']:.3f} s against the server's {server_cpu:.3f} s ({c['cpu_cores_used']:.2f} cores), "
          f"{c['chunk_handling_us_mean']:.0f} us per chunk handled")
    # CPU time, unlike wall time, does not grow with the machine's load. The
    # C++ client measured 0.37-0.45 of the CPU of the Python server that
    # streams to it (idle and loaded), 1.14 in the ASan build (0.18 s against
    # 0.16 s); a client spinning on its sockets burns the run's whole wall
    # time (>= 1.5 s, 9x the server's) instead.
    assert c["cpu_s"] < 2 * server_cpu, (c, server_cpu)
    # Wall time inside the chunk callback, a mean over ~1800 chunks of ~10 us
    # of work: measured 8-42 us (once 254 us on a busy machine); a
    # preemption of a few ms moves the mean by microseconds.
    assert c["chunk_handling_us_mean"] < 1000, c


class TimerProbe:
    """Measures how late this machine wakes a sleeping thread, while a run
    goes on: a thread sleeps until deadlines `period_s` apart and records
    how late it woke (ms). A loaded machine makes these late exactly as it
    makes the driver's timed sends late."""

    def __init__(self, period_s):
        self.period_s, self.late_ms, self.stop = period_s, [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        deadline = time.monotonic()
        while not self.stop.is_set():
            deadline += self.period_s
            time.sleep(max(0.0, deadline - time.monotonic()))
            now = time.monotonic()
            self.late_ms.append((now - deadline) * 1000)
            deadline = max(deadline, now - self.period_s)  # no catching up after a long stall

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def quantile(self, q):
        s = sorted(self.late_ms)
        return s[int(q * (len(s) - 1))]


def test_open_loop_poisson_rate_and_concurrency_cap(tokenmill_bin, fake, tmp_path):
    server = fake("--ttft-ms", "5", "--itl-ms", "1")
    spec = write_spec(tmp_path,
                      traffic={"concurrency": [16], "arrival": "poisson", "rate": 40, "requests_per_cell": 200,
                               "length_buckets": [[8, 16]], "output_buckets": [[4, 4]]},
                      prompts={"token_counter": "words"}, controls={"random_seed": 11})
    out = tmp_path / "out"
    with TimerProbe(0.025) as probe:  # the schedule's mean gap at 40/s
        bench_serve(tokenmill_bin, spec, server.url, out)
    recs = records(out)
    sends = sorted(r["send_ms"] for r in recs)
    rate = (len(sends) - 1) / ((sends[-1] - sends[0]) / 1000)
    assert 30 < rate < 52, rate  # Poisson: 200 arrivals at 40/s, +-4 sd is about +-11/s
    lags = [r["dispatch_lag_ms"] for r in recs if r["dispatch_lag_ms"] is not None]
    assert len(lags) > 150
    lags.sort()
    q = lambda v, x: v[int(x * (len(v) - 1))]
    print(f"\ndispatch lag p50 {q(lags, 0.5):.2f} p99 {q(lags, 0.99):.2f} max {lags[-1]:.2f} ms; probe p50 "
          f"{probe.quantile(0.5):.2f} p99 {probe.quantile(0.99):.2f} max {max(probe.late_ms):.2f} ms "
          f"({len(probe.late_ms)} wake-ups)")
    # Timed sends are as late as the machine wakes threads, which the probe
    # measured meanwhile. Lag p50 measured 0.10-0.57 ms against the probe's
    # 0.09-3.9; lag p99 3-34 ms against a probe maximum of 4-24 (idle, and
    # beside 3-6 CPU burners at load 5-9 on 2 cores; the probe's own p99,
    # 1.7-18, is too noisy a reference). Bounds: p50 within 2 ms of the
    # probe's (a send polled on a 10 ms tick lags 4-5 ms in the median); p99
    # below twice the probe's worst wake-up + 20 ms (measured at most half).
    assert q(lags, 0.5) < probe.quantile(0.5) + 2, (q(lags, 0.5), probe.quantile(0.5))
    assert q(lags, 0.99) < 2 * max(probe.late_ms) + 20, (lags[-5:], max(probe.late_ms))
    # The plan's schedule is what was sent: scheduled offsets match the plan.
    with open(out / "plan.jsonl") as f:
        plan = [json.loads(line) for line in f]
    start = recs[0]["scheduled_ms"] - plan[0]["scheduled_s"] * 1000
    for p, r in zip(plan, recs):
        assert r["scheduled_ms"] == pytest.approx(start + p["scheduled_s"] * 1000, abs=1e-6)


def test_failures_are_classified(tokenmill_bin, fake, tmp_path):
    server = fake("--ttft-ms", "5", "--itl-ms", "5", "--reject-every", "5", "--oom-every", "7",
                  "--stall-every", "11", "--error-every", "13")
    spec = write_spec(tmp_path,
                      traffic={"concurrency": [1], "arrival": "closed_loop", "requests_per_cell": 30,
                               "length_buckets": [[8, 16]], "output_buckets": [[8, 8]], "cancel_rate": 0.0,
                               "request_timeout_s": 1.0},
                      prompts={"token_counter": "words"})
    out = tmp_path / "out"
    bench_serve(tokenmill_bin, spec, server.url, out)
    statuses = [r["status"] for r in records(out)]
    # One client, requests in order: the k-th request (1-based) meets the
    # first rule that matches: reject 5k, error 13k, oom 7k, stall 11k.
    want = []
    for k in range(1, 31):
        want.append("rejected" if k % 5 == 0 else "error" if k % 13 == 0 else "oom" if k % 7 == 0
                    else "timeout" if k % 11 == 0 else "ok")
    assert statuses == want
    rates = load_report(out)["overall"]["rates"]
    assert rates["rejection_rate"] == pytest.approx(6 / 30)
    assert rates["oom_rate"] == pytest.approx(4 / 30)  # 7, 14, 21, 28
    assert rates["timeout_rate"] == pytest.approx(2 / 30)  # 11, 22
    assert rates["error_rate"] == pytest.approx(2 / 30)  # 13, 26


def test_cancelled_streams_disconnect(tokenmill_bin, fake, tmp_path):
    server = fake("--ttft-ms", "5", "--itl-ms", "20")
    spec = write_spec(tmp_path,
                      traffic={"concurrency": [2], "arrival": "closed_loop", "requests_per_cell": 40,
                               "length_buckets": [[8, 16]], "output_buckets": [[10, 10]], "cancel_rate": 0.5},
                      prompts={"token_counter": "words"})
    out = tmp_path / "out"
    bench_serve(tokenmill_bin, spec, server.url, out)
    with open(out / "plan.jsonl") as f:
        plan = [json.loads(line) for line in f]
    recs = records(out)
    for p, r in zip(plan, recs):
        if p["cancel_after"]:
            assert r["status"] == "cancelled", r
            assert len(r["chunk_ms"]) == p["cancel_after"]
        else:
            assert r["status"] == "ok", r
    assert 0 < sum(1 for p in plan if p["cancel_after"]) < 40


def test_prefix_cache_hit_rate_seen_by_the_server(tokenmill_bin, fake, tmp_path):
    server = fake("--ttft-ms", "1", "--itl-ms", "1")
    spec = write_spec(tmp_path,
                      traffic={"concurrency": [1], "arrival": "closed_loop", "requests_per_cell": 30,
                               "length_buckets": [[320, 320]], "output_buckets": [[2, 2]],
                               "cache_hit_rate": [0.0, 0.5]},
                      controls={"random_seed": 5})
    out = tmp_path / "out"
    bench_serve(tokenmill_bin, spec, server.url, out)
    cells = {c["key"]: c for c in load_report(out)["cells"]}
    cold, warm = cells["c1_h0_all"]["server"], cells["c1_h0.5_all"]["server"]
    assert cold["prefix_cache_hit_rate"] == 0
    assert warm["prefix_cache_hit_rate_source"] == "metrics"
    # 160 shared tokens = 10 full blocks of 16, reused by 29 of 30 requests.
    assert warm["planned_shared_fraction"] == pytest.approx(0.5)
    assert warm["prefix_cache_hit_rate"] == pytest.approx(29 * 160 / (30 * 320))


def test_same_seed_same_bytes_and_spec_errors(tokenmill_bin, fake, tmp_path):
    server = fake()
    traffic = {"concurrency": [1, 8], "arrival": "poisson_with_burst", "rate": 4, "requests_per_cell": 25,
               "length_buckets": [[0, 64], [65, 200]], "cache_hit_rate": [0.0, 0.9], "cancel_rate": 0.1}
    spec = write_spec(tmp_path, traffic=traffic, controls={"random_seed": 8842, "warmup_requests": 3})
    plans = []
    for i, seed in enumerate([8842, 8842, 8843]):
        out = tmp_path / f"plan{i}"
        bench_serve(tokenmill_bin, spec, server.url, out, "--dry-run", "--set", f"controls.random_seed={seed}")
        plans.append((out / "plan.jsonl").read_bytes())
    assert plans[0] == plans[1]
    assert plans[0] != plans[2]
    assert len(plans[0].splitlines()) == 3 + 4 * 25
    # The server's tokenizer made the counts exact.
    for line in plans[0].splitlines():
        p = json.loads(line)
        n = sum(2 if len(w) >= 7 else 1 for w in p["prompt"].split())
        assert n == p["input_tokens"]

    bad = write_spec(tmp_path, "bad.yaml", traffic={"concurrency": [1, -2]})
    proc = bench_serve(tokenmill_bin, bad, server.url, tmp_path / "x", check=False)
    assert proc.returncode == 1, proc.stderr
    assert "traffic.concurrency[1]" in proc.stderr
    typo = write_spec(tmp_path, "typo.yaml", trafic={"concurrency": [1]})
    proc = bench_serve(tokenmill_bin, typo, server.url, tmp_path / "x", check=False)
    assert proc.returncode == 1 and "trafic: unknown key" in proc.stderr, proc.stderr
    proc = bench_serve(tokenmill_bin, spec, "http://127.0.0.1:9", tmp_path / "x", check=False)
    assert proc.returncode == 1 and "cannot reach" in proc.stderr, proc.stderr


def test_llama_cpp_tokenize_shape_and_chat_endpoint(tokenmill_bin, fake, tmp_path):
    server = fake("--tokenize-shape", "llama", "--ttft-ms", "5", "--itl-ms", "2")
    spec = write_spec(tmp_path, target={"endpoint": "chat"},
                      traffic={"concurrency": [2], "arrival": "closed_loop", "requests_per_cell": 6,
                               "length_buckets": [[30, 40]], "output_buckets": [[5, 5]]})
    out = tmp_path / "out"
    bench_serve(tokenmill_bin, spec, server.url, out)
    recs = records(out)
    assert all(r["status"] == "ok" and r["output_tokens"] == 5 for r in recs)
    assert all(r["prompt_tokens"] == r["planned_input_tokens"] for r in recs)


def run_for_compare(binary, fake, tmp_path, name, ttft_ms, seed=1):
    server = fake("--ttft-ms", str(ttft_ms), "--itl-ms", "5")
    spec = write_spec(tmp_path, f"{name}.yaml",
                      traffic={"concurrency": [2], "arrival": "closed_loop", "requests_per_cell": 24,
                               "length_buckets": [[8, 16]], "output_buckets": [[6, 6]]},
                      prompts={"token_counter": "words"}, controls={"random_seed": seed},
                      cost={"usd_per_hour": 1.0},
                      gates={"quality_regression": 0, "p99_budget_breach": False})
    out = tmp_path / name
    bench_serve(binary, spec, server.url, out)
    return str(out / "report.json")


def test_compare_writes_a_ticket_and_refuses_other_shapes(tokenmill_bin, fake, tmp_path):
    before = run_for_compare(tokenmill_bin, fake, tmp_path, "before", 200)
    after = run_for_compare(tokenmill_bin, fake, tmp_path, "after", 60)
    q1, q2 = tmp_path / "q1.json", tmp_path / "q2.json"
    q1.write_text('{"score": 0.71}')
    q2.write_text('{"score": 0.71}')
    args = ["bench", "compare", before, after, "--change", "int8_weight_only", "--slice", "long_context_rag"]
    # Without quality results the quality gate (from the spec) is not measured: hold.
    ticket = yaml.safe_load(run_tokenmill(tokenmill_bin, *args).stdout)["optimization_ticket"]
    assert ticket["decision"] == "hold", ticket
    assert ticket["change"] == "int8_weight_only" and ticket["slice"] == "long_context_rag"
    assert ticket["after"]["ttft_ms"] < ticket["before"]["ttft_ms"]
    out = tmp_path / "ticket.yaml"
    ticket = yaml.safe_load(run_tokenmill(tokenmill_bin, *args, "--quality-before", str(q1), "--quality-after",
                                          str(q2), "-o", str(out)).stdout)["optimization_ticket"]
    assert ticket["decision"] == "ship", ticket
    assert {g["name"]: g["status"] for g in ticket["gates"]} == {"quality_regression": "pass", "p99_budget": "pass"}
    assert "c2_h0_all" in ticket["slices"]
    assert yaml.safe_load(out.read_text())["optimization_ticket"]["decision"] == "ship"
    # The reverse direction is a p99 breach: reject.
    ticket = yaml.safe_load(run_tokenmill(tokenmill_bin, "bench", "compare", after, before, "--change", "undo",
                                          "--slice", "s", "--quality-before", str(q1), "--quality-after",
                                          str(q2)).stdout)["optimization_ticket"]
    assert ticket["decision"] == "reject", ticket
    other = run_for_compare(tokenmill_bin, fake, tmp_path, "other", 60, seed=2)
    proc = run_tokenmill(tokenmill_bin, "bench", "compare", before, other, "--change", "x", "--slice", "y",
                         check=False)
    assert proc.returncode == 1
    assert "refusing to compare different traffic shapes" in proc.stderr and "random_seed" in proc.stderr
