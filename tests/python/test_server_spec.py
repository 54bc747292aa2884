"""Speculative decoding (prompt lookup, `--spec ngram`; self-speculation,
`--spec self`; a draft model, `--spec draft`) through the real server and the official openai client on
Gemma 3 270M: the text is the text `tokenmill run` gives without
speculation (greedy), streamed or not; the drafts show up per request in
`timings` and in /metrics (counters, acceptance rate, accepted-length
histogram, draft time share); a request can turn it off
("speculative.n_max": 0) or narrow k; a bad value is a 400."""
import json

import pytest

from conftest import run_tokenmill
from test_server_common import Server

# An input-copying task: the continuation repeats the list, so prompt lookup
# drafts from the prompt and the target accepts most drafts.
COPY_PROMPT = ("Here is a list of fruits: apple, banana, cherry, grape, lemon, mango, orange, peach, pear, plum. "
               "Here is the same list again: apple, banana, cherry, grape, lemon, mango, orange, peach, pear, plum. "
               "Here is the same list once more: apple, banana,")
ENGINE = ["-t", "2", "--kv-memory", "48M"]


@pytest.fixture(scope="module")
def spec_server(tokenmill_bin, gemma_path):
    with Server(tokenmill_bin, gemma_path, *ENGINE, "--spec", "ngram", "--spec-k", "4", "--model-alias",
                "gemma") as s:
        yield s


def plain_text(binary, model, n):
    out = run_tokenmill(binary, "run", "-m", model, "-t", "2", "--temp", "0", "-n", str(n), "-p", COPY_PROMPT).stdout
    assert out.endswith("\n")
    return out[:-1]


def completion(server, **extra):
    r = server.http.post("/v1/completions", json={"model": "gemma", "prompt": COPY_PROMPT, "max_tokens": 40,
                                                  "temperature": 0, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def test_greedy_text_matches_plain_decoding(tokenmill_bin, gemma_path, spec_server):
    want = plain_text(tokenmill_bin, gemma_path, 40)
    before = spec_server.metrics()
    got = spec_server.client().completions.create(model="gemma", prompt=COPY_PROMPT, max_tokens=40, temperature=0)
    assert got.choices[0].text == want
    after = spec_server.metrics()
    drafted = after["tokenmill_spec_draft_tokens_total"] - before["tokenmill_spec_draft_tokens_total"]
    accepted = after["tokenmill_spec_accepted_tokens_total"] - before["tokenmill_spec_accepted_tokens_total"]
    assert drafted > 0 and 0 < accepted <= drafted
    # One accepted-length observation per verified draft, summing to the accepted tokens.
    assert after["tokenmill_spec_accepted_length_count"] > before["tokenmill_spec_accepted_length_count"]
    assert (after["tokenmill_spec_accepted_length_sum"] - before["tokenmill_spec_accepted_length_sum"]) == accepted
    assert 0 < after["tokenmill_spec_acceptance_rate"] <= 1
    assert 0 < after["tokenmill_spec_draft_time_share"] < 1
    assert after["tokenmill_spec_draft_seconds_total"] > 0


def test_streamed_text_matches_and_timings_count_drafts(tokenmill_bin, gemma_path, spec_server):
    want = plain_text(tokenmill_bin, gemma_path, 40)
    stream = spec_server.client().completions.create(model="gemma", prompt=COPY_PROMPT, max_tokens=40,
                                                     temperature=0, stream=True)
    assert "".join(c.choices[0].text for c in stream if c.choices) == want
    t = completion(spec_server)["timings"]
    assert t["draft_tokens"] > 0 and 0 < t["accepted_draft_tokens"] <= t["draft_tokens"]


def test_a_request_can_turn_it_off_or_narrow_it(spec_server):
    off = completion(spec_server, **{"speculative.n_max": 0})
    assert off["timings"]["draft_tokens"] == 0
    narrow = completion(spec_server, **{"speculative.n_max": 1})
    full = completion(spec_server)
    assert narrow["choices"][0]["text"] == off["choices"][0]["text"] == full["choices"][0]["text"]
    # One draft token per step at most: never more drafts than steps.
    assert 0 < narrow["timings"]["draft_tokens"] <= narrow["usage"]["completion_tokens"]
    r = spec_server.http.post("/v1/completions", json={"model": "gemma", "prompt": "x", "speculative.n_max": 99})
    assert r.status_code == 400
    assert "speculative.n_max" in json.dumps(r.json())


@pytest.mark.parametrize("method", ["self", "draft"])
def test_model_drafts_keep_the_greedy_text(tokenmill_bin, gemma_path, method):
    # self: one skipped layer of 18 (on this model a larger skip set drafts
    # badly; docs/benchmarks.md). draft: the model as its own draft model
    # (the only Gemma 3 vocabulary here), so nearly every draft is accepted.
    want = plain_text(tokenmill_bin, gemma_path, 40)
    flags = ["--spec-skip-layers", "9"] if method == "self" else ["--draft-model", gemma_path]
    with Server(tokenmill_bin, gemma_path, *ENGINE, "--spec", method, *flags, "--spec-fixed-k",
                "--model-alias", "gemma") as s:
        got = completion(s)
        assert got["choices"][0]["text"] == want
        t = got["timings"]
        assert t["draft_tokens"] > 0 and 0 < t["accepted_draft_tokens"] <= t["draft_tokens"]
