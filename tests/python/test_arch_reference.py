"""tokenmill's logits against an independent NumPy reference
(reference_forward.py) on small synthetic models of every architecture and
every weight format tokenmill writes.

Each model is written by `tokenmill synth`, read back by the PyPI `gguf`
package (quantized tensors dequantized by gguf.quants), and run in float64 by
the reference. tokenmill runs the same 40-token prompt three ways: chunked
prefill (-b 7, six forward calls), one call (-b 64), and chunked with the
scalar kernels (TOKENMILL_ISA=scalar). All three must match the reference.

Tolerance, float paths: max |logit difference| < 1e-4. tokenmill computes in float32 from
weights dequantized to float32 -- the same values gguf.quants produces (fp16
scales times small integers: exact or within one float32 rounding) -- so the
only differences are float32 rounding in dot products of length <= 512 and
in the norms and softmax: about sqrt(512) * 2^-24 ~ 1.3e-6 relative per
product with O(1) activations (the synth init keeps them O(1)), a few 1e-6
on logits of size O(1..10) after a few layers (observed: <= 6e-6). 1e-4
leaves a 15x margin, while any real mistake (RoPE pairing, a missing norm or
bias, a window off by one, a wrong dequantizer) moves logits by 1e-1..1:
test_reference_notices_mistakes checks that for several such mistakes.

Tolerance, integer paths: with quantized weights and the optimised kernels,
every call (-b 1, -b 7, -b 64) quantizes the
activations to int16 blocks of 32 on the fly (kernels/quantize_act.h): each
value moves by up to max|block| / 65534, about 1e-5 of an activation's size
for blocks with the usual max/rms of 2-3, 200x float32 rounding; carried
through the layers this puts logits 3e-4 .. 5e-4 from the reference
(observed). Those runs are held to 2e-3, still 50x below the smallest
mistake test_reference_notices_mistakes plants, and must pick the same
top-1 token at every position.

The reference itself is checked against llama.cpp (llama-cpp-python, when
installed) in test_reference_agrees_with_llama_cpp, so that a misreading
shared by tokenmill and the reference would still be caught.
"""
import os

import numpy as np
import pytest

from conftest import require_module, run_tokenmill
from reference_forward import ReferenceModel

TOLERANCE = 1e-4
INTEGER_PATH_TOLERANCE = 2e-3
FLOAT_TYPES = {"F32", "F16", "BF16"}
PROMPT_LEN = 40
PROMPT_SEED = 1234

# Shapes whose rows fit the 256-element K-quant blocks (the tiny preset's
# 64/128-wide rows would silently fall back to Q8_0).
WIDE = ("--n-embd", "256", "--n-ff", "512")
# Gemma 3's sixth layer is global: six layers exercise both layer kinds.
SIX_LAYERS = ("--n-layer", "6")

CASES = [
    ("llama", "F32", ()),
    ("qwen2", "F32", ()),
    ("gemma3", "F32", ()),
    ("gemma3", "F32", SIX_LAYERS),
    ("llama", "F16", ()),
    ("qwen2", "F16", ()),
    ("gemma3", "F16", SIX_LAYERS),
    ("llama", "Q8_0", ()),
    ("qwen2", "Q8_0", ()),
    ("gemma3", "Q8_0", SIX_LAYERS),
    ("llama", "Q4_K", WIDE),
    ("qwen2", "Q4_K", WIDE),
    ("gemma3", "Q4_K", WIDE + SIX_LAYERS),
    ("llama", "Q4_K_M", WIDE),
    ("gemma3", "Q4_K_M", WIDE),
    # The remaining formats tokenmill can write, on one architecture.
    ("llama", "BF16", ()),
    ("llama", "Q4_0", ()),
    ("llama", "Q4_1", ()),
    ("llama", "Q5_0", ()),
    ("llama", "Q5_1", ()),
    ("llama", "Q2_K", WIDE),
    ("llama", "Q3_K", WIDE),
    ("llama", "Q5_K", WIDE),
    ("llama", "Q6_K", WIDE),
]


def case_id(case):
    arch, wtype, extra = case
    suffix = "-wide" if "--n-embd" in extra else ""
    suffix += "-6layers" if "--n-layer" in extra else ""
    return f"{arch}-{wtype}{suffix}"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("arch_reference")


_models = {}


def synth(binary, directory, arch, wtype, extra):
    """Path of the synthetic model (written once per module)."""
    key = (arch, wtype, extra)
    if key not in _models:
        path = os.path.join(directory, case_id(key) + ".gguf")
        run_tokenmill(binary, "synth", "--arch", arch, "--preset", "tiny", "--type", wtype,
                      "--seed", "1", *extra, "-o", path, timeout=120)
        _models[key] = path
    return _models[key]


def prompt(n_vocab):
    return np.random.default_rng(PROMPT_SEED).integers(0, n_vocab, PROMPT_LEN).tolist()


def tokenmill_logits(binary, model, ids, out, batch, threads, monkeypatch, isa=None):
    with monkeypatch.context() as m:
        if isa is None:
            m.delenv("TOKENMILL_ISA", raising=False)
        else:
            m.setenv("TOKENMILL_ISA", isa)
        run_tokenmill(binary, "logits", "-m", model, "--prompt-ids", ",".join(map(str, ids)), "-o", out,
                      "-b", str(batch), "-t", str(threads), timeout=120)
    logits = np.load(out)
    assert logits.dtype == np.float32
    return logits


def assert_close(ours, ref, what, tolerance=TOLERANCE):
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape}, reference {ref.shape}"
    assert np.isfinite(ours).all(), f"{what}: non-finite logits"
    diff = np.abs(ours.astype(np.float64) - ref)
    worst = np.unravel_index(np.argmax(diff), diff.shape)
    per_pos = diff.max(axis=1)
    first_bad = int(np.argmax(per_pos > tolerance)) if (per_pos > tolerance).any() else None
    print(f"  {what}: max |dlogit| {diff.max():.2e} at position {worst[0]}, token {worst[1]} "
          f"(|logit| up to {np.abs(ref).max():.1f})")
    assert diff.max() < tolerance, (
        f"{what}: max |dlogit| {diff.max():.3e} at position {worst[0]} token {worst[1]} "
        f"(ours {ours[worst]:.6f}, reference {ref[worst]:.6f}); first position over tolerance "
        f"{first_bad}; per-position max: {np.array2string(per_pos, precision=4, max_line_width=200)}")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_logits_match_reference(tokenmill_bin, model_dir, monkeypatch, case):
    arch, wtype, extra = case
    path = synth(tokenmill_bin, model_dir, arch, wtype, extra)
    ref_model = ReferenceModel(path)
    assert ref_model.arch == arch
    # The file really holds the format under test (not a silent fallback).
    wanted = {"Q4_K", "Q6_K"} if wtype == "Q4_K_M" else {wtype}
    types = ref_model.matrix_types()
    assert wanted <= types, f"{wtype}: the model's matrices are {types}"

    ids = prompt(ref_model.n_vocab)
    ref = ref_model.forward(ids)
    out = os.path.join(model_dir, case_id(case) + ".npy")
    print(f"\n{case_id(case)}: layers {ref_model.n_layer}, n_embd {ref_model.n_embd}, weights {sorted(types)}")
    integer = wtype not in FLOAT_TYPES
    # (name, batch, threads, ISA, path quantizes activations)
    runs = [("chunked -b 7", 7, 2, None, integer), ("one call -b 64", 64, 1, None, integer),
            ("decode -b 1", 1, 2, None, integer), ("scalar -b 7", 7, 2, "scalar", False)]
    for what, batch, threads, isa, int_acts in runs:
        ours = tokenmill_logits(tokenmill_bin, path, ids, out, batch, threads, monkeypatch, isa)
        assert_close(ours, ref, what, INTEGER_PATH_TOLERANCE if int_acts else TOLERANCE)
        if int_acts:
            same = (ours.argmax(axis=1) == ref.argmax(axis=1)).mean()
            assert same == 1.0, f"{what}: top-1 agrees with the reference at {same:.1%} of positions"


# Each mistake a forward pass could make, applied to the reference: tokenmill
# must disagree with the mistaken reference by far more than the tolerance,
# which shows the comparison above can fail.
def _neox_flipped(m):
    m.rope_neox = not m.rope_neox


def _no_window(m):
    m.sliding_window = 0


def _window_off_by_one(m):
    m.sliding_window += 1


def _local_base_is_global(m):
    m.gemma3_local_rope_base = m.rope_base


def _no_post_attn_norm(m):
    for layer in m.layers:
        layer.pop("post_attn_norm")


def _no_qwen_bias(m):
    for layer in m.layers:
        layer.pop("bq")


MISTAKES = [
    ("llama", (), _neox_flipped),
    ("qwen2", (), _neox_flipped),
    ("qwen2", (), _no_qwen_bias),
    ("gemma3", (), _no_window),
    ("gemma3", (), _window_off_by_one),
    ("gemma3", SIX_LAYERS, _local_base_is_global),
    ("gemma3", (), _no_post_attn_norm),
]


@pytest.mark.parametrize("arch,extra,mistake", MISTAKES,
                         ids=[f"{a}-{f.__name__.strip('_')}" for a, _, f in MISTAKES])
def test_reference_notices_mistakes(tokenmill_bin, model_dir, monkeypatch, arch, extra, mistake):
    path = synth(tokenmill_bin, model_dir, arch, "F32", extra)
    ref_model = ReferenceModel(path)
    ids = prompt(ref_model.n_vocab)
    ours = tokenmill_logits(tokenmill_bin, path, ids, os.path.join(model_dir, "mistake.npy"), 64, 1,
                            monkeypatch)
    mistake(ref_model)
    diff = np.abs(ours.astype(np.float64) - ref_model.forward(ids)).max()
    print(f"\n{arch} with {mistake.__name__.strip('_')}: max |dlogit| {diff:.3f}")
    assert diff > 100 * TOLERANCE


# llama.cpp with an F32 KV cache computes llama and qwen2 in float32 like
# tokenmill (observed agreement ~2e-6). Its CPU GELU reads a table of fp16
# values indexed by fp16(x), about 1e-3 relative error per activation, which
# on these gemma3 models shows as up to ~2e-3 on logits: hence 1e-2 there,
# still far below the 0.5..4 that the mistakes above cause.
LLAMA_CPP_CASES = [("llama", (), 1e-4), ("qwen2", (), 1e-4), ("gemma3", SIX_LAYERS, 1e-2)]
GGML_TYPE_F32 = 0


@pytest.mark.parametrize("arch,extra,tolerance", LLAMA_CPP_CASES, ids=[c[0] for c in LLAMA_CPP_CASES])
def test_reference_agrees_with_llama_cpp(tokenmill_bin, model_dir, arch, extra, tolerance):
    llama_cpp = require_module("llama_cpp", "llama-cpp-python", "the second reference")
    path = synth(tokenmill_bin, model_dir, arch, "F32", extra)
    ref_model = ReferenceModel(path)
    ids = prompt(ref_model.n_vocab)
    llm = llama_cpp.Llama(model_path=path, n_ctx=64, n_threads=2, type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32,
                          logits_all=True, verbose=False)
    llm.eval(ids)
    theirs = np.array(llm.scores[: len(ids)], dtype=np.float64)
    diff = np.abs(theirs - ref_model.forward(ids)).max()
    print(f"\nreference vs llama.cpp on synthetic {arch} ({ref_model.n_layer} layers): max |dlogit| {diff:.2e}")
    assert diff < tolerance
