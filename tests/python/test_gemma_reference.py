"""Gemma 3 270M (the real default model) against two independent references:
llama.cpp (PyPI llama-cpp-python, used only here) and a float64 NumPy
implementation of the architecture (tests/python/reference_forward.py).

Figures are printed so that `pytest -s` shows them. The exact reference gets
the issue's thresholds (top-1 agreement >= 99 %, mean KL < 1e-3); llama.cpp's
own approximations put it about 5e-3 KL from the exact maths, so tokenmill is
held to being no farther from it than the exact maths is."""
import hashlib
import os
import tempfile

import numpy as np
import pytest

from conftest import REPO, require_module, run_tokenmill

TEXT_PATH = os.path.join(REPO, "tests", "data", "reference_text.txt")


@pytest.fixture(scope="module")
def reference(gemma_path):
    llama_cpp = require_module("llama_cpp", "llama-cpp-python", "the reference implementation")
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


def kl_and_top1(base, other):
    """Mean and p99 KL(base || other) and top-1 agreement over positions."""
    lp_base, lp_other = log_softmax(base), log_softmax(other)
    kl = (np.exp(lp_base) * (lp_base - lp_other)).sum(axis=-1)
    top1 = (base.argmax(axis=-1) == other.argmax(axis=-1)).mean()
    return kl.mean(), np.quantile(kl, 0.99), top1


@pytest.fixture(scope="module")
def ours_and_exact(tokenmill_bin, gemma_path):
    """Logits over the fixed text from tokenmill and from the float64 NumPy
    reference (tests/python/reference_forward.py: weights read and
    dequantized by the PyPI gguf package, maths written from the published
    architecture), on the token ids tokenmill's tokenizer gives (checked
    against llama.cpp's in test_tokenizer_matches_reference). Needs no
    llama.cpp, so this exact check runs wherever the gguf package does."""
    require_module("gguf", "gguf", "reads the weights for the float64 reference")
    from reference_forward import ReferenceModel
    text = open(TEXT_PATH, encoding="utf-8").read()
    out = run_tokenmill(tokenmill_bin, "tokenize", "-m", gemma_path, input_text=text).stdout.strip()
    ids = [int(t) for t in out.split(",")]
    assert 400 <= len(ids) <= 600
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "logits.npy")
        run_tokenmill(tokenmill_bin, "logits", "-m", gemma_path, "--prompt-ids",
                      ",".join(map(str, ids)), "-o", path, "-t", "2")
        ours = np.load(path)
    exact = exact_logits(gemma_path, ids, ReferenceModel)
    return ids, ours, exact


def exact_logits(path, ids, reference_model):
    """The float64 reference's logits. With TOKENMILL_TEST_CACHE set (the
    test runner sets it to a folder of the current run, so the oracle is
    still computed by this run), the per-ISA stages reuse the first stage's
    result instead of spending about a minute recomputing it."""
    cache = os.environ.get("TOKENMILL_TEST_CACHE")
    if not cache:
        return reference_model(path).forward(ids)
    st = os.stat(path)
    key = hashlib.sha256(repr((os.path.realpath(path), st.st_size, st.st_mtime_ns, ids)).encode()).hexdigest()[:16]
    file = os.path.join(cache, f"gemma_exact_{key}.npy")
    if os.path.exists(file):
        return np.load(file)
    exact = reference_model(path).forward(ids)
    os.makedirs(cache, exist_ok=True)
    np.save(file + ".tmp.npy", exact)
    os.replace(file + ".tmp.npy", file)
    return exact


@pytest.fixture(scope="module")
def logits_three_ways(ours_and_exact, reference):
    """The same logits, and llama.cpp's on the same ids."""
    ids, ours, exact = ours_and_exact
    reference.reset()
    reference.eval(ids)
    llama_cpp_logits = np.array(reference.scores[: len(ids)], dtype=np.float32)
    return ids, ours, llama_cpp_logits, exact


def test_logits_agree_with_exact_reference(ours_and_exact):
    ids, ours, exact = ours_and_exact
    assert ours.shape == exact.shape
    kl, kl99, top1 = kl_and_top1(exact, ours)
    print(f"\nGemma 3 270M, tokenmill vs float64 NumPy reference over {len(ids)} positions: "
          f"top-1 {top1 * 100:.2f} %, mean KL {kl:.3e}, p99 KL {kl99:.3e}")
    assert top1 >= 0.99
    assert kl < 1e-3


def test_logits_as_close_to_llama_cpp_as_the_exact_maths(logits_three_ways):
    """llama.cpp quantizes activations to 8 bits for its integer dot products
    and takes GELU from an fp16 table, so on this model it sits about 5e-3 KL
    away from the exact maths. tokenmill must be no farther from llama.cpp
    than the exact reference is (a wrong layer would add far more)."""
    ids, ours, llama_cpp_logits, exact = logits_three_ways
    kl_ours, kl99_ours, top1_ours = kl_and_top1(llama_cpp_logits, ours)
    kl_exact, _, top1_exact = kl_and_top1(llama_cpp_logits, exact)
    print(f"\nGemma 3 270M vs llama.cpp (llama-cpp-python) over {len(ids)} positions: tokenmill top-1 "
          f"{top1_ours * 100:.2f} %, mean KL {kl_ours:.3e} (p99 {kl99_ours:.3e}); float64 reference top-1 "
          f"{top1_exact * 100:.2f} %, mean KL {kl_exact:.3e}")
    assert kl_ours <= 1.25 * kl_exact + 1e-4
    assert top1_ours >= top1_exact - 0.01
    assert top1_ours >= 0.95 and kl_ours < 2e-2


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
