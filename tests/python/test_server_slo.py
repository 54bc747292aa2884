"""SLO-aware admission through the real server and the official openai
client (`serve --slo-ttft-ms --slo-tpot-ms`), on a small synthetic model.

The load is offered open-loop at twice the rate the server sustained in a
closed-loop calibration run of the same requests, first to a server
without targets, then to one with targets derived from the calibration.
With targets, nine in ten of the requests it admits meet them within a
stated margin and none is far past them (a few dozen requests cannot
estimate a p99 that one hiccup of the machine would not decide), by the
server's own per-request timings (what the promise is about: client
overheads are not the server's); the rest are refused at once with 503
`slo_unattainable` and a Retry-After. Without targets every request is
accepted, as before. /metrics counts the refusals and reports
the forecast's error."""
import concurrent.futures
import http.client
import json
import random
import threading
import time

import openai
import pytest

from test_server_common import Server

PROMPT_TOKENS = 128
MAX_TOKENS = 32
MAX_SEQS = 4
ENGINE = ["-t", "1", "--max-seqs", str(MAX_SEQS), "--kv-memory", "64M", "--model-alias", "m"]
# Slack on the server-side latencies against the targets: the forecast is a model
# of the step costs, re-measured as it goes, and a shared CI machine is noisy.
MARGIN = 1.5
WIDE_MARGIN = 3.0


def prompt(rng):
    return [rng.randrange(3, 500) for _ in range(PROMPT_TOKENS)]  # distinct prompts: no prefix hits


def send(client, tokens):
    """One request: ("ok", timings) or ("refused", status, code, retry_after, seconds to the answer)."""
    start = time.monotonic()
    try:
        r = client.completions.create(model="m", prompt=tokens, max_tokens=MAX_TOKENS, temperature=0,
                                      extra_body={"min_tokens": MAX_TOKENS})
        return ("ok", r.model_extra["timings"])
    except openai.APIStatusError as e:
        body = e.body if isinstance(e.body, dict) else {}
        return ("refused", e.status_code, body.get("code"), e.response.headers.get("retry-after"),
                time.monotonic() - start)


def closed_loop(client, rng, n, all_ok=True):
    """MAX_SEQS clients back to back: the sustained rate and the timings."""
    prompts = [prompt(rng) for _ in range(n)]
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(MAX_SEQS) as pool:
        results = list(pool.map(lambda p: send(client, p), prompts))
    elapsed = time.monotonic() - start
    if all_ok:
        assert all(r[0] == "ok" for r in results), results
    return n / elapsed, [r[1] for r in results if r[0] == "ok"]


def open_loop(client, rng, rate, n):
    """n requests at Poisson arrivals of `rate` per second, not waiting for answers."""
    gaps = [rng.expovariate(rate) for _ in range(n)]
    prompts = [prompt(rng) for _ in range(n)]
    start = time.monotonic()

    def at(i):
        delay = start + sum(gaps[:i + 1]) - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        return send(client, prompts[i])

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        return list(pool.map(at, range(n)))


def p99(values):
    values = sorted(values)
    return values[min(len(values) - 1, int(0.99 * len(values)))]


@pytest.fixture(scope="module")
def calibration(tokenmill_bin, slow):
    """The unprotected server: its sustained rate, the targets derived from
    it, and what 2x that rate does to it."""
    rng = random.Random(7)
    with Server(tokenmill_bin, slow, *ENGINE) as s:
        client = s.client()
        closed_loop(client, rng, 2 * MAX_SEQS)  # warm-up
        rate, timings = closed_loop(client, rng, 6 * MAX_SEQS)
        ttft = sorted(t["ttft_ms"] for t in timings)[len(timings) // 2]
        tpot = sorted(t["tpot_ms"] for t in timings)[len(timings) // 2]
        # What a full batch achieves, with room for one step of queueing.
        targets = {"ttft_ms": 2.0 * ttft, "tpot_ms": 1.5 * tpot}
        unprotected = open_loop(client, rng, 2 * rate, 12 * MAX_SEQS)
    return {"rate": rate, "targets": targets, "unprotected": unprotected}


def test_without_targets_every_request_is_accepted(calibration):
    results = calibration["unprotected"]
    assert all(r[0] == "ok" for r in results), [r for r in results if r[0] != "ok"]


def test_admitted_requests_meet_the_targets_and_the_rest_are_refused_at_once(tokenmill_bin, slow, calibration):
    targets = calibration["targets"]
    rng = random.Random(11)
    with Server(tokenmill_bin, slow, *ENGINE, "--slo-ttft-ms", f"{targets['ttft_ms']:.1f}", "--slo-tpot-ms",
                f"{targets['tpot_ms']:.2f}") as s:
        client = s.client()
        closed_loop(client, rng, 2 * MAX_SEQS, all_ok=False)  # warm-up: the step costs are measured
        key = 'tokenmill_requests_rejected_total{reason="slo_unattainable"}'
        refused_before = s.metrics()[key]
        results = open_loop(client, rng, 2 * calibration["rate"], 12 * MAX_SEQS)
        ok = [r[1] for r in results if r[0] == "ok"]
        refused = [r for r in results if r[0] == "refused"]
        m = s.metrics()
        summary = (f"targets {targets}, rate {calibration['rate']:.1f}/s, {len(ok)} admitted, "
                   f"{len(refused)} refused; admitted TTFT {sorted(round(t['ttft_ms']) for t in ok)}, "
                   f"TPOT {sorted(round(t['tpot_ms'], 2) for t in ok)}; "
                   f"{ {k: v for k, v in m.items() if 'slo' in k and 'bucket' not in k} }")
        print(summary)
        assert refused, "nothing was refused at twice the sustained rate: " + summary
        assert len(ok) >= len(results) // 4, "too few admitted for the check to mean anything: " + summary
        for r in refused:
            assert r[1:3] == (503, "slo_unattainable"), r
            assert r[3] is not None and int(r[3]) >= 1, r
        # Refused before any work was spent: far sooner than a first token was promised.
        refusal_p50 = sorted(r[4] for r in refused)[len(refused) // 2]
        assert refusal_p50 * 1e3 < targets["ttft_ms"] * 4, summary
        # With a few dozen admitted requests the p99 is the single worst one,
        # which one hiccup of a shared machine decides. So: nine in ten within
        # the margin (what the forecast controls), and none past a wide bound
        # (what a forecast that ignored the load would break at 2x the rate).
        for metric in ("ttft_ms", "tpot_ms"):
            values = [t[metric] for t in ok]
            over = [v for v in values if v > MARGIN * targets[metric]]
            assert len(over) <= len(values) // 10, f"{metric}: {len(over)} of {len(values)} over the margin; {summary}"
            assert max(values) <= WIDE_MARGIN * targets[metric], f"{metric} max {max(values):.2f}; {summary}"
        ttft_p99 = p99([t["ttft_ms"] for t in ok])
        # The unprotected server queued everyone: its p99 is worse.
        unprotected_p99 = p99([r[1]["ttft_ms"] for r in calibration["unprotected"] if r[0] == "ok"])
        assert unprotected_p99 > ttft_p99, f"unprotected TTFT p99 {unprotected_p99:.1f} ms; {summary}"

        assert m[key] - refused_before == len(refused)
        assert m['tokenmill_slo_forecasts_total{metric="ttft"}'] >= 1
        assert m["tokenmill_slo_step_fixed_seconds"] > 0
        assert m["tokenmill_slo_step_per_prefill_token_seconds"] > 0


def stream_one(base, tokens, out, index):
    """One streamed request through a raw connection: ("ok", server timings,
    client TTFT ms), or ("refused", status, headers, body) when the answer
    is not a 200 stream. An error event inside a 200 is recorded as such."""
    host, port = base.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    body = json.dumps({"model": "m", "prompt": tokens, "max_tokens": MAX_TOKENS, "temperature": 0,
                        "min_tokens": MAX_TOKENS, "stream": True})
    start = time.monotonic()
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        out[index] = ("refused", resp.status, dict(resp.getheaders()), resp.read())
        conn.close()
        return
    first, timings = None, None
    for line in resp:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        event = json.loads(line[len(b"data: "):])
        if "error" in event:
            out[index] = ("error-in-200", event)
            conn.close()
            return
        if first is None and event["choices"] and event["choices"][0].get("text"):
            first = (time.monotonic() - start) * 1e3
        if event.get("timings"):
            timings = event["timings"]
    conn.close()
    out[index] = ("ok", timings, first)


def test_a_cold_server_holds_its_targets_from_the_first_request(tokenmill_bin, slow, calibration):
    """A burst at a server that has served nothing yet: the gate forecasts
    from its start-up calibration, so it admits what it can serve within the
    targets and refuses the rest with a 503 before any byte, queued ones
    included (before the calibration, a cold gate admitted everything and
    refused late, as an error event inside a 200 stream)."""
    targets = calibration["targets"]
    rng = random.Random(13)
    # 16 at once (before any step could have measured anything), then 24
    # more 50 ms apart.
    n, at_once, gap_s = 40, 16, 0.05
    with Server(tokenmill_bin, slow, *ENGINE, "--slo-ttft-ms", f"{targets['ttft_ms']:.1f}", "--slo-tpot-ms",
                f"{targets['tpot_ms']:.2f}") as s:
        m = s.metrics()
        # The calibration's own requests are not counted as clients'.
        assert m["tokenmill_requests_submitted_total"] == 0, m
        assert m["tokenmill_slo_step_fixed_seconds"] > 0 and m["tokenmill_slo_step_per_prefill_token_seconds"] > 0
        prompts = [prompt(rng) for _ in range(n)]
        out = [None] * n
        threads = [threading.Thread(target=stream_one, args=(s.base, prompts[i], out, i)) for i in range(n)]
        t0 = time.monotonic()
        for i, t in enumerate(threads):
            delay = t0 + max(i - at_once, 0) * gap_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            t.start()
        for t in threads:
            t.join()
        ok = [r for r in out if r[0] == "ok"]
        refused = [r for r in out if r[0] == "refused"]
        errors_in_200 = [r for r in out if r[0] == "error-in-200"]
        ttfts = sorted(r[1]["ttft_ms"] for r in ok)
        summary = (f"targets {targets}, {len(ok)} admitted, {len(refused)} refused, {len(errors_in_200)} errors "
                   f"inside a 200; admitted server TTFT {[round(t) for t in ttfts]}, client TTFT "
                   f"{sorted(round(r[2]) for r in ok)}")
        print(summary)
        assert not errors_in_200, summary
        assert refused and ok, summary
        for r in refused:
            assert r[1] == 503, r
            assert r[2].get("Retry-After") and int(r[2]["Retry-After"]) >= 1, r
            assert json.loads(r[3])["error"]["code"] == "slo_unattainable", r
        # Nine in ten admitted within 20 % of the target, none far past it
        # (a few dozen requests: the single worst is one hiccup's).
        within = [t for t in ttfts if t <= 1.2 * targets["ttft_ms"]]
        assert len(within) >= 0.9 * len(ttfts), summary
        assert ttfts[-1] <= WIDE_MARGIN * targets["ttft_ms"], summary
