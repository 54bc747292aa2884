"""Prompt log-probabilities through the API: perplexity of a text computed
with /v1/completions (echo=True, logprobs=1, max_tokens=0) equals the one
from `tokenmill eval ppl` and a NumPy log-softmax over `tokenmill logits` on
the same tokens, on a tiny synthesized model and on Gemma 3 270M. Also the
response shape: the first token's logprob is null, text_offset follows the
token strings, generated tokens follow the prompt's, streaming agrees."""
import json
import math
import os

import numpy as np
import openai
import pytest

from conftest import run_tokenmill
from test_server_common import Server

TEXT = ("The quick brown fox jumps over the lazy dog. A stitch in time saves nine, "
        "and the early bird catches the worm while the cat sleeps by the fire.")


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def raw_bytes(token):
    if not token.startswith("bytes:"):
        return token.encode()
    return bytes(int(h, 16) for h in token[len("bytes:"):].split("\\x")[1:])


def reference_ppls(binary, model, ids, tmp):
    """(eval ppl, NumPy over logits) for the token ids, one window."""
    out = os.path.join(tmp, "logits.npy")
    run_tokenmill(binary, "logits", "-m", model, "--prompt-ids", ",".join(map(str, ids)), "-o", out, "-t", "2")
    lp = log_softmax(np.load(out))
    nll = [-lp[j - 1, ids[j]] for j in range(1, len(ids))]
    tokens = os.path.join(tmp, "tokens.txt")
    with open(tokens, "w") as f:
        f.write(",".join(map(str, ids)) + "\n")
    res = os.path.join(tmp, "ppl.json")
    run_tokenmill(binary, "eval", "ppl", "-m", model, "--tokens", tokens, "--ctx", str(len(ids)), "--json", res,
                  "-t", "2")
    with open(res) as f:
        got = json.load(f)["result"]
    assert got["tokens"] == len(ids) - 1
    return got["ppl"], float(np.exp(np.mean(nll)))


def api_ppl(server, model_name):
    ids = server.http.post("/tokenize", json={"prompt": TEXT}).json()["tokens"]
    r = server.client().completions.create(model=model_name, prompt=TEXT, echo=True, logprobs=1, max_tokens=0)
    c = r.choices[0]
    assert c.text == TEXT and c.finish_reason == "length"
    assert r.usage.completion_tokens == 0 and r.usage.prompt_tokens == len(ids)
    lp = c.logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == len(ids)
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    for chosen, top in zip(lp.token_logprobs[1:], lp.top_logprobs[1:]):
        assert chosen <= 0 and 1 <= len(top) <= 2
        assert max(top.values()) >= chosen - 1e-6
    return ids, math.exp(-sum(lp.token_logprobs[1:]) / (len(ids) - 1))


def check_model(binary, model, model_name, tmp):
    with Server(binary, model, "-t", "2", "--kv-dtype", "f32", "--kv-memory", "64M") as s:
        ids, got = api_ppl(s, model_name)
    eval_ppl, numpy_ppl = reference_ppls(binary, model, ids, tmp)
    assert eval_ppl == pytest.approx(numpy_ppl, rel=1e-4)
    assert got == pytest.approx(numpy_ppl, rel=1e-3)
    assert got == pytest.approx(eval_ppl, rel=1e-3)


def test_perplexity_through_the_api_tiny(tokenmill_bin, tiny, tmp_path):
    check_model(tokenmill_bin, tiny, "tiny", str(tmp_path))


def test_perplexity_through_the_api_gemma(tokenmill_bin, gemma_path, tmp_path):
    check_model(tokenmill_bin, gemma_path, "gemma-3-270m-q4_k_m", str(tmp_path))


def test_echo_logprobs_shape_and_stream(tokenmill_bin, tiny):
    with Server(tokenmill_bin, tiny, "-t", "1") as s:
        client = s.client()
        prompt = "hello world"
        n_prompt = len(s.http.post("/tokenize", json={"prompt": prompt}).json()["tokens"])
        kw = dict(model="tiny", prompt=prompt, echo=True, logprobs=2, max_tokens=4, temperature=0,
                  extra_body={"ignore_eos": True})
        r = client.completions.create(**kw)
        lp = r.choices[0].logprobs
        assert len(lp.tokens) == n_prompt + 4 and lp.token_logprobs[0] is None
        assert all(v is not None for v in lp.token_logprobs[1:])
        # text_offset counts the bytes of the listed token strings (a token
        # that is no valid UTF-8 alone is listed as "bytes:\\xNN...").
        joined = b""
        for tok, off in zip(lp.tokens, lp.text_offset):
            assert off == len(joined)
            joined += raw_bytes(tok)
        # The generated part equals what a plain request reports.
        plain = client.completions.create(model="tiny", prompt=prompt, logprobs=2, max_tokens=4, temperature=0,
                                          extra_body={"ignore_eos": True})
        assert lp.tokens[n_prompt:] == plain.choices[0].logprobs.tokens
        # (the output projection runs over all prompt rows here: rounding differs slightly)
        assert lp.token_logprobs[n_prompt:] == pytest.approx(plain.choices[0].logprobs.token_logprobs, abs=1e-4)
        assert r.choices[0].text == prompt + plain.choices[0].text
        # Streaming: the echo chunk carries the prompt's logprobs, then the tokens follow.
        chunks = list(client.completions.create(stream=True, **kw))
        streamed = [t for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.tokens]
        assert streamed == lp.tokens
        values = [v for c in chunks if c.choices and c.choices[0].logprobs for v in c.choices[0].logprobs.token_logprobs]
        assert values[0] is None and values[1:] == pytest.approx(lp.token_logprobs[1:], abs=1e-4)
        assert "".join(c.choices[0].text for c in chunks if c.choices) == r.choices[0].text
        # max_tokens 0 without echo is still refused.
        with pytest.raises(openai.BadRequestError):
            client.completions.create(model="tiny", prompt=prompt, logprobs=1, max_tokens=0)
