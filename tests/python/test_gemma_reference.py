"""Gemma 3 270M (the real default model) against llama.cpp as an independent
reference implementation (PyPI llama-cpp-python, used only here).

Figures are printed so that `pytest -s` shows them; the asserts are the
issue's thresholds: top-1 agreement >= 99 % and mean KL divergence < 1e-3."""
import os
import tempfile

import numpy as np
import pytest

from conftest import REPO, run_tokenmill

TEXT_PATH = os.path.join(REPO, "tests", "data", "reference_text.txt")


@pytest.fixture(scope="module")
def reference(gemma_path):
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python (the reference) is not installed")
    return llama_cpp.Llama(model_path=gemma_path, n_ctx=1024, n_threads=2, logits_all=True, verbose=False)


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def test_tokenizer_matches_reference(tokenmill_bin, gemma_path, reference):
    texts = [open(TEXT_PATH, encoding="utf-8").read(), "The capital of France is",
             "Hello world! 😀 naïve café  double  space\n\nnew paragraph", "日本語のテキスト", "  leading"]
    for text in texts:
        want = reference.tokenize(text.encode("utf-8"), add_bos=True)
        out = run_tokenmill(tokenmill_bin, "tokenize", "-m", gemma_path, input_text=text).stdout.strip()
        got = [int(t) for t in out.split(",")]
        assert got == want, f"tokenization differs for {text[:40]!r}"


def test_logits_agree_with_reference(tokenmill_bin, gemma_path, reference):
    text = open(TEXT_PATH, encoding="utf-8").read()
    ids = reference.tokenize(text.encode("utf-8"), add_bos=True)
    assert 400 <= len(ids) <= 600
    reference.reset()
    reference.eval(ids)
    ref = np.array(reference.scores[: len(ids)], dtype=np.float32)

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.npy")
        run_tokenmill(tokenmill_bin, "logits", "-m", gemma_path, "--prompt-ids",
                      ",".join(map(str, ids)), "-o", out, "-t", "2")
        ours = np.load(out)
    assert ours.shape == ref.shape

    lp_ref, lp_ours = log_softmax(ref), log_softmax(ours)
    kl = (np.exp(lp_ref) * (lp_ref - lp_ours)).sum(axis=-1)
    top1 = (ref.argmax(axis=-1) == ours.argmax(axis=-1)).mean()
    print(f"\nGemma 3 270M vs llama.cpp (llama-cpp-python) over {len(ids)} positions: "
          f"top-1 agreement {top1 * 100:.2f} %, mean KL {kl.mean():.3e}, p99 KL {np.quantile(kl, 0.99):.3e}, "
          f"max KL {kl.max():.3e}, max |dlogit| {np.abs(ref - ours).max():.3f}")
    assert top1 >= 0.99
    assert kl.mean() < 1e-3


@pytest.mark.parametrize("prompt,expected", [
    ("Q: What is the capital of France?\nA:", "Paris"),
    ("The Eiffel Tower is located in the city of", "Paris"),
    ("Paris is the capital of", "France"),
])
def test_greedy_generation_is_fluent(tokenmill_bin, gemma_path, prompt, expected):
    proc = run_tokenmill(tokenmill_bin, "run", "-m", gemma_path, "-p", prompt, "-n", "24", "--temp", "0")
    text = proc.stdout
    assert expected in text, f"continuation of {prompt!r} was {text!r}"
    words = text.split()
    assert len(words) >= 8 and sum(w.isascii() for w in words) >= 0.9 * len(words), text
    assert "prefill" in proc.stderr and "decode" in proc.stderr  # the timing summary line
