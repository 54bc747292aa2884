"""`tokenmill quantize` end to end: every output type is a valid GGUF that the
PyPI `gguf` package reads, with the planned tensor types, and whose weights
the package's own (independent) dequantizers decode to within each type's
error of the source; llama.cpp (llama-cpp-python) loads a Q4_K_M output and
agrees with tokenmill's logits; bad input fails with a clear message and
leaves no file behind."""
import os
import subprocess

import numpy as np
import pytest

from conftest import require_module, run_tokenmill

gguf = require_module("gguf", "gguf", "the validity oracle")

# RMS error of a matrix relative to its RMS: about step / sqrt(12) / rms for
# a uniform grid (Q8_0 ~ 0.3 %, 4-bit ~ 8 %), with slack.
RMS_BOUND = {"F16": 1e-3, "BF16": 5e-3, "Q8_0": 0.01, "Q6_K": 0.03, "Q5_0": 0.06, "Q5_1": 0.05,
             "Q5_K": 0.06, "Q4_0": 0.12, "Q4_1": 0.11, "Q4_K": 0.12, "Q4_K_M": 0.12, "Q5_K_M": 0.06,
             "Q3_K": 0.25, "FP8_E4M3": 0.04, "W8A8": 0.01}


@pytest.fixture(scope="module")
def source(tokenmill_bin, tmp_path_factory):
    """A small synthetic llama whose rows (256, 512) fit every block size."""
    d = tmp_path_factory.mktemp("quant")
    path = str(d / "src.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--n-embd", "256", "--n-ff", "512", "--n-layer", "4", "--n-head", "4",
                  "--n-kv-head", "2", "--vocab", "512", "--seed", "3", "-o", path, "-t", "2")
    return d, path


def tensors(path):
    return {t.name: t for t in gguf.GGUFReader(path).tensors}


def as_matrix(t):
    """Dequantized values with the package's own decoders, in GGUF row order."""
    return np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float64).reshape(-1)


@pytest.mark.parametrize("qtype", sorted(RMS_BOUND))
def test_output_is_valid_gguf_within_error(tokenmill_bin, source, qtype):
    d, src = source
    out = str(d / f"{qtype}.gguf")
    run_tokenmill(tokenmill_bin, "quantize", src, out, "--type", qtype, "-t", "2")
    base, quant = tensors(src), tensors(out)
    assert set(base) == set(quant)
    reader = gguf.GGUFReader(out)
    file_type = int(reader.fields["general.file_type"].parts[-1][0])
    assert file_type == {"F16": 1, "BF16": 32, "Q8_0": 7, "Q6_K": 18, "Q5_0": 8, "Q5_1": 9, "Q5_K": 16, "Q4_0": 2,
                         "Q4_1": 3, "Q4_K": 14, "Q4_K_M": 15, "Q5_K_M": 17, "Q3_K": 11, "FP8_E4M3": 32,
                         "W8A8": 7}[qtype]
    for name, t in quant.items():
        b = base[name]
        assert list(t.shape) == list(b.shape), name
        if len(b.shape) == 1 or name.endswith("norm.weight"):
            assert t.tensor_type == gguf.GGMLQuantizationType.F32, name
            continue
        want = {"FP8_E4M3": "BF16", "W8A8": "Q8_0", "Q4_K_M": None, "Q5_K_M": None}.get(qtype, qtype)
        if want is not None:
            assert t.tensor_type.name == want, f"{name}: {t.tensor_type.name}"
        x, y = as_matrix(b), as_matrix(t)
        rel = np.sqrt(np.mean((x - y) ** 2) / np.mean(x ** 2))
        assert rel < RMS_BOUND[qtype], f"{qtype} {name}: relative RMS error {rel:.4f}"
    # The mixture's policy: the classifier and the more-bits layers' ffn_down
    # and attn_v in Q6_K (of 4 layers: the last eighth, 3, and (l - 0) % 3 == 2).
    if qtype == "Q4_K_M":
        assert quant["output.weight"].tensor_type.name == "Q6_K"
        assert quant["blk.3.ffn_down.weight"].tensor_type.name == "Q6_K"
        assert quant["blk.2.attn_v.weight"].tensor_type.name == "Q6_K"
        assert quant["blk.0.ffn_down.weight"].tensor_type.name == "Q4_K"
        assert quant["blk.1.ffn_down.weight"].tensor_type.name == "Q4_K"
        assert quant["blk.1.attn_q.weight"].tensor_type.name == "Q4_K"
    # tokenmill loads and runs its own output.
    npy = str(d / f"{qtype}.npy")
    run_tokenmill(tokenmill_bin, "logits", "-m", out, "--prompt-ids", "1,5,9,22", "-o", npy, "-t", "2")
    assert np.isfinite(np.load(npy)).all()


def test_llama_cpp_loads_q4_k_m_and_agrees(tokenmill_bin, source):
    llama_cpp = require_module("llama_cpp", "llama-cpp-python", "loads the quantized files")
    d, src = source
    out = str(d / "lc_q4km.gguf")
    run_tokenmill(tokenmill_bin, "quantize", src, out, "--type", "Q4_K_M", "-t", "2")
    ids = [1, 5, 9, 22, 7, 100]
    m = llama_cpp.Llama(model_path=out, n_ctx=64, logits_all=True, verbose=False, n_threads=2)
    m.eval(ids)
    theirs = np.array(m.scores[: len(ids)], dtype=np.float64)
    npy = str(d / "lc.npy")
    run_tokenmill(tokenmill_bin, "logits", "-m", out, "--prompt-ids", ",".join(map(str, ids)), "-o", npy, "-t", "2")
    ours = np.load(npy).astype(np.float64)
    npy_f32 = str(d / "lc_f32.npy")
    run_tokenmill(tokenmill_bin, "logits", "-m", src, "--prompt-ids", ",".join(map(str, ids)), "-o", npy_f32, "-t", "2")
    f32 = np.load(npy_f32).astype(np.float64)
    rms = lambda a: float(np.sqrt(np.mean(a ** 2)))
    # llama.cpp rounds activations to 8 bits for K-quant products, so the two
    # readers differ a little (measured 0.026 RMS on logits of RMS 1); both
    # must be far closer to each other than either is to the F32 model (0.26:
    # the quantization error itself), i.e. they decode the same weights.
    assert rms(ours - theirs) < 0.05, rms(ours - theirs)
    assert rms(ours - theirs) < 0.25 * rms(ours - f32), (rms(ours - theirs), rms(ours - f32))


def test_dry_run_and_keep_output_f16(tokenmill_bin, source):
    d, src = source
    out = str(d / "dry.gguf")
    proc = run_tokenmill(tokenmill_bin, "quantize", src, out, "--type", "Q4_K_M", "--dry-run")
    assert "blk.0.ffn_down.weight" in proc.stdout and "Q6_K" in proc.stdout
    assert "bits per weight" in proc.stdout
    assert not os.path.exists(out)
    run_tokenmill(tokenmill_bin, "quantize", src, out, "--type", "Q4_0", "--keep-output-f16")
    assert tensors(out)["output.weight"].tensor_type.name == "F16"
    assert tensors(out)["blk.0.attn_q.weight"].tensor_type.name == "Q4_0"


def expect_failure(binary, args, message, out):
    proc = run_tokenmill(binary, *args, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr
    assert not os.path.exists(out) and not os.path.exists(out + ".tmp")


def test_bad_input_fails_cleanly(tokenmill_bin, source, shared_dir):
    d, src = source
    out = str(d / "bad.gguf")
    expect_failure(tokenmill_bin, ["quantize", src, out, "--type", "Q4_K_L"], "unknown quantization type", out)
    q8 = str(d / "already_q8.gguf")
    run_tokenmill(tokenmill_bin, "quantize", src, q8, "--type", "Q8_0")
    expect_failure(tokenmill_bin, ["quantize", q8, out, "--type", "Q4_0"], "--allow-requantize", out)
    proc = run_tokenmill(tokenmill_bin, "quantize", q8, out, "--type", "Q4_0", "--allow-requantize")
    assert "warning: requantizing" in proc.stderr
    os.remove(out)
    truncated = str(d / "truncated.gguf")
    with open(src, "rb") as f:
        data = f.read()
    with open(truncated, "wb") as f:
        f.write(data[: len(data) // 3])
    expect_failure(tokenmill_bin, ["quantize", truncated, out, "--type", "Q8_0"], "error:", out)
    expect_failure(tokenmill_bin, ["quantize", src, src, "--type", "Q8_0"], "is the input file", out)
    vocab = os.path.join(shared_dir, "vocab", "ggml-vocab-gpt-2.gguf")  # a vocabulary, no model
    expect_failure(tokenmill_bin, ["quantize", vocab, out, "--type", "Q8_0"], "error:", out)
    # Rows that fit no block (stories260K's ffn_down has 172 columns) fall
    # back per tensor, and the tool says so.
    stories = str(d / "stories.gguf")
    run_tokenmill(tokenmill_bin, "convert", "--from", "llama2c", os.path.join(shared_dir, "models", "stories260K.bin"),
                  "-o", stories)
    proc = run_tokenmill(tokenmill_bin, "quantize", stories, out, "--type", "Q4_K")
    assert "blk.0.ffn_down.weight: row length 172 is not a multiple of the Q4_K block size 256; stored as F16" in proc.stderr
    assert tensors(out)["blk.0.ffn_down.weight"].tensor_type.name == "F16"
    assert tensors(out)["blk.0.attn_q.weight"].tensor_type.name == "Q5_0"


@pytest.fixture(scope="module")
def moe_source(tokenmill_bin, tmp_path_factory):
    """A synthetic Qwen3-MoE (8 experts, 2 per token) with 256-wide rows, 8 layers."""
    d = tmp_path_factory.mktemp("quant_moe")
    path = str(d / "moe.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "qwen3moe", "--n-embd", "256", "--n-ff-exp", "256", "--n-layer",
                  "8", "--n-expert", "8", "--n-expert-used", "2", "--vocab", "512", "--seed", "4", "-o", path)
    return d, path


@pytest.mark.parametrize("qtype", ["Q4_K_M", "Q4_0"])
def test_moe_experts_quantized_router_kept(tokenmill_bin, moe_source, qtype):
    """The stacked experts are quantized (Q4_K_M: ffn_down_exps in Q6_K in
    the more-bits layers), the router stays F32; the file decodes in the
    PyPI reader, tokenmill follows the float64 reference of the quantized
    file, and llama.cpp loads it. Where llama.cpp and tokenmill disagree
    (routing near-ties under llama.cpp's 8-bit activations), tokenmill is
    the closer to the reference."""
    from reference_forward import ReferenceModel
    d, src = moe_source
    out = str(d / f"moe_{qtype}.gguf")
    run_tokenmill(tokenmill_bin, "quantize", src, out, "--type", qtype, "-t", "2")
    quant = tensors(out)
    for layer in range(8):
        assert quant[f"blk.{layer}.ffn_gate_inp.weight"].tensor_type.name == "F32"
        for role in ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"):
            t = quant[f"blk.{layer}.{role}.weight"]
            assert list(t.shape) == [256, 256, 8], (role, list(t.shape))
            more_bits = layer in (0, 7) or (layer - 1) % 3 == 2  # quant/tensor_policy.h, 8 layers
            want = "Q4_0" if qtype == "Q4_0" else "Q6_K" if role == "ffn_down_exps" and more_bits else "Q4_K"
            assert t.tensor_type.name == want, (layer, role, t.tensor_type.name)
    ids = list(np.random.default_rng(9).integers(3, 512, 48))
    npy = str(d / f"moe_{qtype}.npy")
    run_tokenmill(tokenmill_bin, "logits", "-m", out, "--prompt-ids", ",".join(map(str, ids)), "-o", npy, "-t", "2")
    ours = np.load(npy).astype(np.float64)
    ref_model = ReferenceModel(out)
    ref = ref_model.forward(ids)
    # tokenmill stays within test_arch_reference.py's integer-path bound of
    # the reference, except from a routing coin flip on (a router gap below
    # 1e-3, which its 16-bit activations may tip either way).
    coin_flip = np.array(ref_model.router_gaps).min(axis=0) < 1e-3
    off = np.flatnonzero(np.abs(ours - ref).max(axis=1) > 2e-3)
    upto = int(off[0]) if off.size else len(ids)
    assert upto == len(ids) or coin_flip[upto], f"tokenmill leaves the reference at position {upto}"
    assert upto >= 16, f"a routing coin flip at position {upto}: choose another text"

    llama_cpp = require_module("llama_cpp", "llama-cpp-python", "loads the quantized files")
    m = llama_cpp.Llama(model_path=out, n_ctx=64, logits_all=True, verbose=False, n_threads=2)
    m.eval(ids)
    theirs = np.array(m.scores[: len(ids)], dtype=np.float64)
    err = lambda a: np.abs(a - ref).max(axis=1)
    same = ours.argmax(axis=1) == theirs.argmax(axis=1)
    disputed = np.flatnonzero((np.abs(ours - theirs).max(axis=1) > 0.25) | ~same)
    disputed = disputed[disputed < upto]
    print(f"\n{qtype}: top-1 with llama.cpp {same.mean():.1%}, disputed positions {disputed.tolist()}, "
          f"max |dlogit| ours {err(ours)[:upto].max():.2e} vs llama.cpp's {err(theirs)[:upto].max():.2e}")
    assert (err(ours)[disputed] < err(theirs)[disputed]).all()
    assert same[:upto].mean() >= 0.8
