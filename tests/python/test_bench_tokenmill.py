"""Smoke run of `tokenmill bench serve` against a real `tokenmill serve` on
the tiny synthetic model: the driver, the server's /tokenize, timings
extension, prefix-cache counters and SSE stream all meet for real, and the
shipped specs parse. Skips (with the reason) when this build has no `serve`."""
import json
import os
import subprocess
import time

import pytest

from conftest import REPO, run_tokenmill

SPECS = os.path.join(REPO, "benchmarks", "specs")


@pytest.fixture(scope="module")
def server(tokenmill_bin, tmp_path_factory):
    if run_tokenmill(tokenmill_bin, "serve", "--help", check=False).returncode != 0:
        pytest.skip("this tokenmill build has no `serve` command yet")
    model = str(tmp_path_factory.mktemp("models") / "tiny.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "llama", "--preset", "tiny", "--type", "Q8_0", "--seed", "3",
                  "-o", model)
    proc = subprocess.Popen([tokenmill_bin, "serve", "-m", model, "--port", "0", "-t", "1", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url, deadline = None, time.time() + 60
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("event") == "listening":
            url = event["url"]
        if event.get("event") == "ready":
            break
    if url is None:
        proc.kill()
        pytest.fail("tokenmill serve did not report a listening url")
    yield url, proc.pid
    proc.terminate()
    proc.wait(timeout=30)


def test_bench_serve_against_tokenmill(tokenmill_bin, server, tmp_path):
    url, pid = server
    spec = tmp_path / "spec.yaml"
    spec.write_text("""
inference_benchmark: tokenmill_smoke
traffic:
  concurrency: [1, 4]
  arrival: closed_loop
  requests_per_cell: 8
  length_buckets: [[16, 64], [65, 160]]
  output_buckets: [[8, 16]]
  cache_hit_rate: [0.0, 0.9]
controls: {warmup_requests: 2, random_seed: 4}
cost: {usd_per_hour: 0.5}
report: [queue_ms, ttft_ms, tpot_ms, p99_ms, cost_per_success]
""")
    out = tmp_path / "out"
    run_tokenmill(tokenmill_bin, "bench", "serve", str(spec), "--url", url, "-o", str(out), "--server-pid",
                  str(pid), timeout=600)
    report = json.loads((out / "report.json").read_text())
    o = report["overall"]
    assert o["requests"]["ok"] == 32, o["requests"]
    assert report["target"]["model"]  # resolved from GET /v1/models
    for line in (out / "records.jsonl").read_text().splitlines():
        r = json.loads(line)
        # The planned count excludes BOS; the server counts what it ran.
        assert r["planned_input_tokens"] <= r["prompt_tokens"] <= r["planned_input_tokens"] + 1, r
        assert 8 <= r["output_tokens"] <= 16
        assert r["server_queue_ms"] is not None  # tokenmill's timings extension
    cells = {c["key"]: c for c in report["cells"]}
    shared = cells["c1_h0.9_all"]["server"]
    assert shared["prefix_cache_hit_rate_source"] == "metrics"
    assert shared["prefix_cache_hit_rate"] > 0.3, shared
    assert cells["c1_h0_all"]["server"]["prefix_cache_hit_rate"] < 0.2
    assert o["server"]["memory_high_water_bytes"] > 1e6  # /proc of --server-pid
    assert "Bottleneck overall" in (out / "report.md").read_text()


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(SPECS) if f.endswith(".yaml")) if os.path.isdir(SPECS)
                         else [])
def test_shipped_specs_plan(tokenmill_bin, server, tmp_path, name):
    url, _ = server
    out = tmp_path / "plan"
    run_tokenmill(tokenmill_bin, "bench", "serve", os.path.join(SPECS, name), "--url", url, "-o", str(out),
                  "--dry-run", "--set", "prompts.token_counter=words", "--set", "traffic.requests_per_cell=3",
                  "--set", "controls.warmup_requests=1")
    assert (out / "plan.jsonl").stat().st_size > 0
