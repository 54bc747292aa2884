"""`tokenmill serve --kv-policy streaming` (attention sinks + recent window)
end to end, on the tiny synthetic llama (context 256), through the official
openai client: a generation longer than the window reports the evicted
positions in its timings and /metrics counts them; a short one is untouched
and gives the same text as a server keeping the full cache; a KV budget too
small for one whole request still serves it under the policy and refuses
it without; the bad flags are refused at start-up with their reason."""
import subprocess

import pytest

from test_server_common import Server

PROMPT = "Once upon a time there was"
POLICY = ["--kv-policy", "streaming", "--kv-sinks", "4", "--kv-window", "48", "--block-size", "16"]


@pytest.fixture(scope="module", params=["preserve", "rerotate"])
def streaming(request, tokenmill_bin, tiny):
    with Server(tokenmill_bin, tiny, "-t", "1", "--kv-memory", "32M", *POLICY, "--kv-positions", request.param) as s:
        yield s


@pytest.fixture(scope="module")
def full(tokenmill_bin, tiny):
    with Server(tokenmill_bin, tiny, "-t", "1", "--kv-memory", "32M", "--block-size", "16") as s:
        yield s


def complete(server, max_tokens):
    r = server.client().completions.create(model="tiny", prompt=PROMPT, max_tokens=max_tokens, temperature=0,
                                           extra_body={"ignore_eos": True})
    return r, r.model_extra["timings"]


def test_long_generations_report_what_was_evicted(streaming):
    before = streaming.metrics().get("tokenmill_kv_evicted_tokens_total", 0)
    r, timings = complete(streaming, 200)
    assert r.usage.completion_tokens == 200
    assert timings["context_compressed"] is True
    # ~207 positions, sinks one block, a window of 48: at least 8 blocks went.
    assert timings["kv_evicted_tokens"] >= 128 and timings["kv_evicted_tokens"] % 16 == 0, timings
    after = streaming.metrics()["tokenmill_kv_evicted_tokens_total"]
    assert after - before == timings["kv_evicted_tokens"]
    assert streaming.metrics()["tokenmill_kv_blocks_used"] == 0


def test_short_generations_equal_the_full_cache(streaming, full):
    r, timings = complete(streaming, 30)
    assert timings["context_compressed"] is False and timings["kv_evicted_tokens"] == 0
    want, _ = complete(full, 30)
    assert r.choices[0].text == want.choices[0].text


def test_the_policy_serves_what_the_budget_could_not_hold(tokenmill_bin, tiny):
    # 4 blocks of 16 positions (the tiny model's KV: 2 layers x 64 x 2 x f16).
    budget = ["-t", "1", "--kv-memory", str(4 * 16 * 2 * 64 * 2 * 2), "--block-size", "16", "--max-seqs", "1",
              "--prefill-chunk", "16", "--max-batch-tokens", "16"]
    with Server(tokenmill_bin, tiny, *budget, "--kv-policy", "streaming", "--kv-sinks", "4", "--kv-window", "16") as s:
        r, timings = complete(s, 150)
        assert r.usage.completion_tokens == 150 and timings["context_compressed"] is True
    with Server(tokenmill_bin, tiny, *budget) as s:
        with pytest.raises(Exception) as e:
            complete(s, 150)
        assert "KV blocks" in str(e.value)


@pytest.mark.parametrize("flags, message", [
    (["--kv-policy", "h2o"], "--kv-policy 'h2o' is not one of"),
    (["--kv-policy", "streaming", "--kv-window", "0"], "--kv-window must be at least 1"),
    (["--kv-policy", "streaming", "--kv-positions", "absolute"], "--kv-positions 'absolute' is not one of"),
])
def test_bad_flags_are_refused(tokenmill_bin, tiny, flags, message):
    p = subprocess.run([tokenmill_bin, "serve", "-m", tiny, "--port", "0", *flags], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode != 0
    assert message in p.stderr
