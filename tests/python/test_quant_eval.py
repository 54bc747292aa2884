"""`tokenmill eval`, `tokenmill calibrate` and the load-time runtimes, end to
end on stories260K (a real trained model, ../shared/models):

* eval ppl equals a NumPy computation from `tokenmill logits` on the same
  windows (independent log-softmax);
* eval kld: a model against itself is exactly 0; saved base logits give the
  live numbers; KV q8_0 / fp8 report their bytes per token;
* calibrate + quantize --imatrix lowers the KL divergence at 4 bits;
* the FP8 runtime is lossless against the same file run dense; W8A8 stays
  within 1.5x of its measured KLD.
The Gemma 3 270M case is in test_quant_eval_gemma.py."""
import json
import os

import numpy as np
import pytest

from conftest import REPO, run_json, run_tokenmill


@pytest.fixture(scope="module")
def stories(tokenmill_bin, shared_dir, tmp_path_factory):
    """stories260K as GGUF, plus token files sampled from it (it has no
    tokenizer): 4 evaluation and 4 calibration sequences of 192 tokens."""
    d = str(tmp_path_factory.mktemp("qeval"))
    model = os.path.join(d, "stories.gguf")
    run_tokenmill(tokenmill_bin, "convert", "--from", "llama2c",
                  os.path.join(shared_dir, "models", "stories260K.bin"), "-o", model)
    files = {}
    for name, seeds in (("eval", (1, 2, 3, 4)), ("cal", (11, 12, 13, 14))):
        lines = []
        for s in seeds:
            ids = run_tokenmill(tokenmill_bin, "run", "-m", model, "--prompt-ids", "1", "-n", "191", "--temp", "1",
                                "--seed", str(s), "--print-ids", "-t", "2").stdout.strip()
            lines.append("1," + ids)
        files[name] = os.path.join(d, f"{name}.txt")
        with open(files[name], "w") as f:
            f.write("\n".join(lines) + "\n")
    return d, model, files


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def test_ppl_matches_numpy_over_windows(tokenmill_bin, stories):
    d, model, files = stories
    ctx, stride = 64, 24
    got = run_json(tokenmill_bin, d, "eval", "ppl", "-m", model, "--tokens", files["eval"], "--ctx", str(ctx),
                   "--stride", str(stride), "--batch", "16")["result"]
    nll = []
    for line in open(files["eval"]):
        s = [int(t) for t in line.split(",")]
        a, done = 1, 1
        while True:  # the window scheme of eval/windows.h
            e = min(a + ctx, len(s))
            inp = [s[0]] + s[a:e - 1]
            out = os.path.join(d, "w.npy")
            run_tokenmill(tokenmill_bin, "logits", "-m", model, "--prompt-ids", ",".join(map(str, inp)), "-o", out)
            lp = log_softmax(np.load(out))
            nll += [-lp[j - a, s[j]] for j in range(max(a, done), e)]
            done = e
            if e == len(s):
                break
            a += stride
    assert got["tokens"] == len(nll) == 4 * 191
    assert got["ppl"] == pytest.approx(float(np.exp(np.mean(nll))), rel=1e-4)
    assert [b["first"] for b in got["buckets"]] == [0, 16]  # edges 0, 16, 64 for ctx 64


def test_kld_self_saved_logits_and_kv_types(tokenmill_bin, stories):
    d, model, files = stories
    common = ["--tokens", files["eval"], "--ctx", "192"]
    self_kl = run_json(tokenmill_bin, d, "eval", "kld", "-m", model, "--base", model, *common)["result"]
    assert self_kl["mean_kld"] == 0.0 and self_kl["top1"] == 1.0
    q8 = os.path.join(d, "q8.gguf")
    run_tokenmill(tokenmill_bin, "quantize", model, q8, "--type", "Q8_0")
    saved = os.path.join(d, "base.logits")
    live = run_json(tokenmill_bin, d, "eval", "kld", "-m", q8, "--base", model, *common, "--save-base-logits", saved)
    again = run_json(tokenmill_bin, d, "eval", "kld", "-m", q8, "--base-logits", saved)
    print(f"\nstories260K Q8_0 mean KLD {live['result']['mean_kld']:.5f}")
    # Measured 0.0278 on these sequences (0.014-0.028 on five other seed
    # sets; the card's 8 x 256 tokens: 0.021): bound 2x. KLD grows with the
    # square of the logit error, so this allows 1.4x the rounding error.
    assert 0 < live["result"]["mean_kld"] < 0.06
    for key in ("mean_kld", "p99_kld", "top1", "ppl", "base_ppl", "tokens"):
        assert again["result"][key] == live["result"][key], key
    # KV types: f32 1280 bytes per token (5 layers x 2 x 32 x 4); q8_0 and
    # fp8 one 34-byte group per 32-wide row: 340.
    kv = {}
    for dtype in ("f16", "q8_0", "fp8_e4m3"):
        r = run_json(tokenmill_bin, d, "eval", "kld", "-m", model, "--base", model, "--kv-dtype", dtype, *common)
        kv[dtype] = r
        assert r["base"]["kv_bytes_per_token"] == 1280
    print("KV mean KLD " + ", ".join(f"{t} {kv[t]['result']['mean_kld']:.6f} (top-1 {kv[t]['result']['top1']:.4f})"
                                     for t in kv))
    assert kv["f16"]["model"]["kv_bytes_per_token"] == 640
    assert kv["q8_0"]["model"]["kv_bytes_per_token"] == 340
    assert kv["f16"]["result"]["mean_kld"] < kv["q8_0"]["result"]["mean_kld"] < kv["fp8_e4m3"]["result"]["mean_kld"]
    # Measured on these sequences: f16 1.2e-5, q8_0 0.0057 (0.0024-0.0057 on
    # five other seed sets), fp8 0.132 (0.066-0.132; one scale serves four
    # 8-wide heads, card: 0.10). Bounds 2-2.5x; the ordering alone let any
    # of them grow up to the next.
    assert kv["f16"]["result"]["mean_kld"] < 3e-5, kv["f16"]["result"]
    assert kv["q8_0"]["result"]["mean_kld"] < 0.012, kv["q8_0"]["result"]
    assert kv["fp8_e4m3"]["result"]["mean_kld"] < 0.27, kv["fp8_e4m3"]["result"]
    assert kv["q8_0"]["result"]["top1"] >= 0.95, kv["q8_0"]["result"]


def test_imatrix_lowers_kld_at_4_bits(tokenmill_bin, stories):
    d, model, files = stories
    imatrix = os.path.join(d, "stories.imatrix")
    run_tokenmill(tokenmill_bin, "calibrate", "-m", model, "--tokens", files["cal"], "-o", imatrix, "--ctx", "192")
    kl = {}
    for label, extra in (("plain", []), ("imatrix", ["--imatrix", imatrix])):
        out = os.path.join(d, f"q4_{label}.gguf")
        run_tokenmill(tokenmill_bin, "quantize", model, out, "--type", "Q4_0", *extra)
        kl[label] = run_json(tokenmill_bin, d, "eval", "kld", "-m", out, "--base", model, "--tokens", files["eval"],
                             "--ctx", "192")["result"]["mean_kld"]
    print(f"\nstories260K Q4_0 mean KLD: plain rounding {kl['plain']:.4f}, with imatrix {kl['imatrix']:.4f}")
    assert kl["imatrix"] < 0.95 * kl["plain"]


def test_fp8_runtime_is_lossless_and_w8a8_runs(tokenmill_bin, stories):
    d, model, files = stories
    common = ["--tokens", files["eval"], "--ctx", "192"]
    fp8 = os.path.join(d, "fp8.gguf")
    run_tokenmill(tokenmill_bin, "quantize", model, fp8, "--type", "FP8_E4M3")
    packed = run_json(tokenmill_bin, d, "eval", "ppl", "-m", fp8, *common)  # the file asks for the FP8 runtime
    dense = run_json(tokenmill_bin, d, "eval", "ppl", "-m", fp8, "--runtime", "dense", *common)
    assert packed["model"]["runtime"] == "fp8_e4m3" and dense["model"]["runtime"] == "dense"
    # Same weights (packing is lossless), other summation order.
    assert packed["result"]["ppl"] == pytest.approx(dense["result"]["ppl"], rel=1e-5)
    # Packed 8-bit (33 bytes per 32 weights) except ffn_down (172 columns,
    # not a multiple of 32: BF16), against the BF16 file.
    assert packed["model"]["weight_bytes"] < 0.65 * dense["model"]["weight_bytes"]
    imatrix = os.path.join(d, "w.imatrix")
    run_tokenmill(tokenmill_bin, "calibrate", "-m", model, "--tokens", files["cal"], "-o", imatrix, "--ctx", "192")
    w8 = os.path.join(d, "w8a8.gguf")
    run_tokenmill(tokenmill_bin, "quantize", model, w8, "--type", "W8A8", "--imatrix", imatrix)
    w = run_json(tokenmill_bin, d, "eval", "kld", "-m", w8, "--base", model, *common)
    assert w["model"]["runtime"] == "w8a8"
    print(f"\nstories260K W8A8 + SmoothQuant mean KLD {w['result']['mean_kld']:.5f}, top-1 {w['result']['top1']:.4f}")
    # Measured 0.0488 on these sequences (0.024-0.040 on five other seed
    # sets; card, 8 x 256 tokens: 0.034). Bound 1.5x (1.2x the logit error):
    # activations rounded toward zero instead of to nearest measure 0.085,
    # 6-bit activations 0.30 and 4-bit ones 0.97, which the old bound of
    # 1 nat let through.
    assert 0 < w["result"]["mean_kld"] < 0.075
    bad = run_tokenmill(tokenmill_bin, "eval", "ppl", "-m", model, "--runtime", "w8a8", *common, check=False)
    assert bad.returncode != 0 and "needs Q8_0 weight matrices" in bad.stderr
