"""stories260K (a real trained llama2.c model from ../shared/models) imported
with `tokenmill convert` must reproduce the llama2.c reference exactly:
greedy continuations token for token, first-step top-5 logits within 1e-3.
The KV cache is F32 here: one of the 200-token references passes a near-tie
(top two logits 5.6203 vs 5.6173 at step 37) that fp16 K/V rounding swaps."""
import json
import os
import tempfile

import numpy as np
import pytest

from conftest import run_tokenmill


@pytest.fixture(scope="module")
def stories(tokenmill_bin, shared_dir):
    ckpt = os.path.join(shared_dir, "models", "stories260K.bin")
    expected = json.load(open(os.path.join(shared_dir, "models", "stories260K.expected.json")))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "stories260K.gguf")
        run_tokenmill(tokenmill_bin, "convert", "--from", "llama2c", ckpt, "-o", out)
        yield out, expected["cases"], tmp


def test_greedy_continuations_match(tokenmill_bin, stories):
    model, cases, _ = stories
    for case in cases:
        ids = ",".join(map(str, case["prompt"]))
        proc = run_tokenmill(tokenmill_bin, "run", "-m", model, "--prompt-ids", ids, "-n",
                             str(len(case["greedy"])), "--temp", "0", "--print-ids", "-t", "2",
                             "--kv-dtype", "f32")
        got = [int(t) for t in proc.stdout.strip().split(",")]
        assert got == case["greedy"], f"prompt {case['prompt']}"


def test_first_step_top5_logits(tokenmill_bin, stories):
    model, cases, tmp = stories
    for i, case in enumerate(cases):
        out = os.path.join(tmp, f"logits{i}.npy")
        run_tokenmill(tokenmill_bin, "logits", "-m", model, "--prompt-ids",
                      ",".join(map(str, case["prompt"])), "-o", out)
        last = np.load(out)[-1]
        top5 = list(np.argsort(-last, kind="stable")[:5])
        assert top5 == case["top5_ids"]
        np.testing.assert_allclose(last[top5], case["top5_logits"], atol=1e-3)


def test_scalar_isa_gives_identical_tokens(tokenmill_bin, stories):
    """The scalar kernels (forced by TOKENMILL_ISA) and the SIMD ones agree."""
    model, cases, _ = stories
    case = cases[0]
    env = dict(os.environ, TOKENMILL_ISA="scalar")
    import subprocess
    proc = subprocess.run([tokenmill_bin, "run", "-m", model, "--prompt-ids", ",".join(map(str, case["prompt"])),
                           "-n", str(len(case["greedy"])), "--temp", "0", "--print-ids", "--kv-dtype", "f32"],
                          capture_output=True, text=True, env=env, check=True)
    assert [int(t) for t in proc.stdout.strip().split(",")] == case["greedy"]
