"""`tokenmill serve --kv-policy streaming|h2o` (attention sinks + recent
window; + heavy hitters within a budget) end to end, on the tiny synthetic
llama (context 256), through the official openai client: a generation
longer than the window reports the evicted positions in its timings and
/metrics counts them; a short one is untouched and gives the same text as a
server keeping the full cache; a KV budget too small for one whole request
still serves it under the policy and refuses it without; a request may
bring its own policy (the `kv_policy` field) and then gets the text of a
server run with that policy; bad flags and bad request policies are refused
with their reason."""
import subprocess

import pytest

from test_server_common import Server

PROMPT = "Once upon a time there was"
# Prefill in chunks of 32: a re-rotating policy then spans at most 112
# positions (sinks, window, a step), within the context, so it may run past it.
POLICY = ["--kv-policy", "streaming", "--kv-sinks", "4", "--kv-window", "48", "--block-size", "16", "--prefill-chunk", "32"]


H2O = ["--kv-policy", "h2o", "--kv-sinks", "4", "--kv-window", "32", "--kv-budget", "64", "--block-size", "16",
       "--prefill-chunk", "32"]


@pytest.fixture(scope="module", params=["streaming-preserve", "streaming-rerotate", "h2o-preserve"])
def streaming(request, tokenmill_bin, tiny):
    kind, positions = request.param.split("-")
    policy = POLICY if kind == "streaming" else H2O
    with Server(tokenmill_bin, tiny, "-t", "1", "--kv-memory", "32M", *policy, "--kv-positions", positions) as s:
        s.positions = positions
        yield s


@pytest.fixture(scope="module")
def full(tokenmill_bin, tiny):
    with Server(tokenmill_bin, tiny, "-t", "1", "--kv-memory", "32M", "--block-size", "16", "--prefill-chunk", "32") as s:
        yield s


def complete(server, max_tokens, **extra):
    r = server.client().completions.create(model="tiny", prompt=PROMPT, max_tokens=max_tokens, temperature=0,
                                           extra_body={"ignore_eos": True, **extra})
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


@pytest.mark.parametrize("flags, policy", [
    (H2O, {"type": "h2o", "sinks": 4, "window": 32, "budget": 64}),
    (POLICY + ["--kv-positions", "rerotate"], {"type": "streaming", "sinks": 4, "window": 48, "positions": "rerotate"}),
])
def test_a_request_brings_its_own_policy(full, tokenmill_bin, tiny, flags, policy):
    own, own_timings = complete(full, 150, kv_policy=policy)
    assert own_timings["context_compressed"] is True and own_timings["kv_evicted_tokens"] >= 64
    with Server(tokenmill_bin, tiny, "-t", "1", "--kv-memory", "32M", *flags) as s:
        want, want_timings = complete(s, 150)
    assert own.choices[0].text == want.choices[0].text
    assert own_timings["kv_evicted_tokens"] == want_timings["kv_evicted_tokens"]
    # The same request without it keeps everything.
    _, plain = complete(full, 150)
    assert plain["context_compressed"] is False


def test_rerotation_runs_past_the_model_context(full, streaming, tokenmill_bin, tiny):
    # The tiny model's context is 256 tokens: 400 more run only where the
    # positions are re-rotated (the server's policy or the request's own),
    # and only when the policy's positions fit the context.
    if streaming.positions == "rerotate":
        r, timings = complete(streaming, 400)
        assert r.usage.completion_tokens == 400 and timings["kv_evicted_tokens"] >= 300
    else:
        with pytest.raises(Exception) as e:
            complete(streaming, 400)
        assert "exceeds the model context of 256 tokens" in str(e.value)
    own, own_timings = complete(full, 400, kv_policy={"type": "h2o", "window": 32, "budget": 64,
                                                      "positions": "rerotate"})
    assert own.usage.completion_tokens == 400 and own_timings["context_compressed"] is True
    with Server(tokenmill_bin, tiny, "-t", "1", "--kv-memory", "32M", "--block-size", "16") as s:  # steps of 256
        with pytest.raises(Exception) as e:
            complete(s, 400, kv_policy={"type": "streaming", "window": 48, "positions": "rerotate"})
        assert "spans up to 336 positions with steps of 256 tokens" in str(e.value)


@pytest.mark.parametrize("policy, message", [
    ({"type": "h2o", "window": 64, "budget": 16}, "--kv-budget (16) must hold at least the sinks and the window"),
    ({"type": "lru"}, "is not one of: full, streaming, h2o"),
    ({"sinks": 4}, "'kv_policy.type' is required"),
    ({"type": "streaming", "windw": 8}, "windw"),
    (7, "'kv_policy' must be a policy name or an object"),
])
def test_bad_request_policies_are_refused(full, policy, message):
    with pytest.raises(Exception) as e:
        complete(full, 10, kv_policy=policy)
    assert message in str(e.value)
    assert "400" in str(e.value) or "BadRequest" in type(e.value).__name__


@pytest.mark.parametrize("flags, message", [
    (["--kv-policy", "lru"], "--kv-policy 'lru' is not one of"),
    (["--kv-policy", "h2o", "--kv-window", "512", "--kv-budget", "256"], "--kv-budget (256) must hold"),
    (["--kv-policy", "streaming", "--kv-window", "0"], "--kv-window must be at least 1"),
    (["--kv-policy", "streaming", "--kv-positions", "absolute"], "--kv-positions 'absolute' is not one of"),
])
def test_bad_flags_are_refused(tokenmill_bin, tiny, flags, message):
    p = subprocess.run([tokenmill_bin, "serve", "-m", tiny, "--port", "0", *flags], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode != 0
    assert message in p.stderr
