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
COIN_FLIP = 1e-3  # router logit gap within which a token may go to either expert
FLOAT_TYPES = {"F32", "F16", "BF16"}
PROMPT_LEN = 40
PROMPT_SEED = 1234

# Shapes whose rows fit the 256-element K-quant blocks (the tiny preset's
# 64/128-wide rows would silently fall back to Q8_0).
WIDE = ("--n-embd", "256", "--n-ff", "512")
# Gemma 3's sixth layer is global: six layers exercise both layer kinds.
SIX_LAYERS = ("--n-layer", "6")
# Qwen 3 decouples the head size from n_embd / n_head (0.6B: 16 heads of 128
# on n_embd 1024): 4 heads of 32 on n_embd 64 make q and k 128 wide.
WIDE_HEADS = ("--head-dim", "32")
# Mixtral: a llama file with experts.
MOE = ("--n-expert", "4", "--n-expert-used", "2")

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
    # phi3: fused attn_qkv and ffn_up (gate and up) split into views at load;
    # Q4_K_M stores attn_qkv as Q5_K. gemma2: the tiny model's first layer
    # has the sliding window, the second is global; soft-capped attention
    # scores and logits.
    ("phi3", "F32", ()),
    ("phi3", "F16", ()),
    ("phi3", "Q8_0", ()),
    ("phi3", "Q4_K", WIDE),
    ("phi3", "Q4_K_M", WIDE),
    ("gemma2", "F32", ()),
    ("gemma2", "F32", SIX_LAYERS),
    ("gemma2", "F16", ()),
    ("gemma2", "Q8_0", ()),
    ("gemma2", "Q4_K", WIDE),
    # qwen3: per-head q/k norms, no biases; olmo2: norms after the blocks
    # only, q/k norms over the whole projection; granite: the llama layout
    # with embedding, residual, attention and logit multipliers.
    ("qwen3", "F32", ()),
    ("qwen3", "F32", WIDE_HEADS),
    ("olmo2", "F32", ()),
    ("granite", "F32", ()),
    ("qwen3", "F16", WIDE_HEADS),
    ("olmo2", "F16", ()),
    ("granite", "F16", ()),
    ("qwen3", "Q8_0", WIDE_HEADS),
    ("olmo2", "Q8_0", ()),
    ("granite", "Q8_0", ()),
    ("qwen3", "Q4_K", WIDE),
    ("olmo2", "Q4_K", WIDE),
    ("granite", "Q4_K", WIDE),
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
    # Mixture of experts (4 experts, 2 per token; the router stays F32):
    # qwen2moe with its gated shared expert and q/k/v biases, qwen3moe
    # (renormalised top-k, per-head q/k norms), olmoe (full-width q/k
    # norms, unnormalised top-k), and llama with experts (Mixtral).
    ("qwen2moe", "F32", ()),
    ("qwen3moe", "F32", ()),
    ("olmoe", "F32", ()),
    ("llama", "F32", MOE),
    ("qwen2moe", "F16", ()),
    ("qwen3moe", "Q8_0", ()),
    ("olmoe", "Q8_0", ()),
    ("llama", "Q8_0", MOE),
    ("qwen2moe", "Q4_K", WIDE),
    ("qwen3moe", "Q4_K_M", WIDE),
    ("olmoe", "Q4_0", ()),
    ("llama", "Q4_K_M", WIDE + MOE),
]


def case_id(case):
    arch, wtype, extra = case
    suffix = "-wide" if "--n-embd" in extra else ""
    suffix += "-6layers" if "--n-layer" in extra else ""
    suffix += "-widehead" if "--head-dim" in extra else ""
    suffix += "-moe" if "--n-expert" in extra else ""
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
    # Mixture of experts: on the integer paths a token whose router logits
    # tie within COIN_FLIP may go to either expert (the 16-bit activations
    # move router logits by ~1e-5; float paths by ~1e-6); from its position
    # on, logits may differ by O(1). Those runs are compared up to there.
    flips = np.flatnonzero(np.array(ref_model.router_gaps).min(axis=0) < COIN_FLIP) if ref_model.n_expert else []
    int_upto = int(flips[0]) if len(flips) else len(ids)
    out = os.path.join(model_dir, case_id(case) + ".npy")
    print(f"\n{case_id(case)}: layers {ref_model.n_layer}, n_embd {ref_model.n_embd}, weights {sorted(types)}")
    integer = wtype not in FLOAT_TYPES
    # (name, batch, threads, ISA, path quantizes activations)
    runs = [("chunked -b 7", 7, 2, None, integer), ("one call -b 64", 64, 1, None, integer),
            ("decode -b 1", 1, 2, None, integer), ("scalar -b 7", 7, 2, "scalar", False)]
    for what, batch, threads, isa, int_acts in runs:
        upto = int_upto if int_acts else len(ids)
        if upto < len(ids):
            print(f"  {what}: a routing coin flip at position {upto}; compared up to it")
            assert upto >= len(ids) // 3
        ours = tokenmill_logits(tokenmill_bin, path, ids, out, batch, threads, monkeypatch, isa)[:upto]
        assert_close(ours, ref[:upto], what, INTEGER_PATH_TOLERANCE if int_acts else TOLERANCE)
        if int_acts:
            same = (ours.argmax(axis=1) == ref[:upto].argmax(axis=1)).mean()
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


def _no_attn_softcap(m):
    m.attn_softcap = 0.0


def _no_final_softcap(m):
    m.final_softcap = 0.0


def _window_on_odd_layers(m):
    m.layer_is_local = lambda i: m.sliding_window > 0 and i % 2 == 1


def _gate_up_swapped(m):
    for layer in m.layers:
        layer["w_gate"], layer["w_up"] = layer["w_up"], layer["w_gate"]


def _fused_k_v_swapped(m):
    for layer in m.layers:
        layer["wk"], layer["wv"] = layer["wv"], layer["wk"]


def _no_qk_norm(m):
    for layer in m.layers:
        layer.pop("q_norm")
        layer.pop("k_norm")


def _pre_norm_added(m):
    # Unit-weight norms in front of olmo2's blocks, as a llama-style layer would have.
    for layer in m.layers:
        layer["attn_norm"] = np.ones(m.n_embd)
        layer["ffn_norm"] = np.ones(m.n_embd)


def _qk_norm_per_head(m):
    m.qk_norm_full_width = False


def _no_residual_scale(m):
    m.residual_scale = 1.0


def _no_embedding_scale(m):
    m.embd_scale = 1.0


def _default_attention_scale(m):
    m.attn_scale = 1.0 / np.sqrt(m.head_dim)


def _no_logit_scale(m):
    m.logit_scale = 1.0


def _moe_normalisation_flipped(m):
    m.moe_normalised = not m.moe_normalised


def _no_shared_expert(m):
    for layer in m.layers:
        layer.pop("shexp_gate")


def _one_expert_per_token(m):
    m.n_expert_used = 1


MISTAKES = [
    ("llama", (), _neox_flipped),
    ("qwen2", (), _neox_flipped),
    ("qwen2", (), _no_qwen_bias),
    ("gemma3", (), _no_window),
    ("gemma3", (), _window_off_by_one),
    ("gemma3", SIX_LAYERS, _local_base_is_global),
    ("gemma3", (), _no_post_attn_norm),
    ("gemma2", (), _no_attn_softcap),
    ("gemma2", (), _no_final_softcap),
    ("gemma2", (), _window_on_odd_layers),
    ("gemma2", (), _no_window),
    ("gemma2", (), _no_post_attn_norm),
    ("phi3", (), _gate_up_swapped),
    ("phi3", (), _fused_k_v_swapped),
    ("phi3", (), _neox_flipped),
    ("qwen3", (), _no_qk_norm),
    ("qwen3", WIDE_HEADS, _neox_flipped),
    ("olmo2", (), _pre_norm_added),
    ("olmo2", (), _qk_norm_per_head),
    ("olmo2", (), _no_post_attn_norm),
    ("granite", (), _no_residual_scale),
    ("granite", (), _no_embedding_scale),
    ("granite", (), _default_attention_scale),
    ("granite", (), _no_logit_scale),
    ("qwen3moe", (), _moe_normalisation_flipped),
    ("qwen2moe", (), _moe_normalisation_flipped),
    ("llama", MOE, _moe_normalisation_flipped),
    ("qwen2moe", (), _no_shared_expert),
    ("olmoe", (), _one_expert_per_token),
    ("olmoe", (), _qk_norm_per_head),
]


@pytest.mark.parametrize("arch,extra,mistake", MISTAKES,
                         ids=[f"{a}{'-moe' if e == MOE else ''}-{f.__name__.strip('_')}" for a, e, f in MISTAKES])
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


# llama.cpp with an F32 KV cache computes llama, qwen2 and phi3 in float32
# like tokenmill (observed agreement ~2e-6). Its CPU GELU reads a table of
# fp16 values indexed by fp16(x), about 1e-3 relative error per activation,
# which on these gemma3 and gemma2 models shows as up to ~2e-3 on logits:
# hence 1e-2 there,
# still far below the 0.5..4 that the mistakes above cause.
LLAMA_CPP_CASES = [("llama", (), 1e-4), ("qwen2", (), 1e-4), ("gemma3", SIX_LAYERS, 1e-2),
                   ("qwen3", (), 1e-4), ("qwen3", WIDE_HEADS, 1e-4), ("olmo2", (), 1e-4), ("granite", (), 1e-4),
                   ("phi3", (), 1e-4), ("gemma2", SIX_LAYERS, 1e-2), ("qwen2moe", (), 1e-4), ("qwen3moe", (), 1e-4),
                   ("olmoe", (), 1e-4), ("llama", MOE, 1e-4)]
GGML_TYPE_F32 = 0


@pytest.mark.parametrize("arch,extra,tolerance", LLAMA_CPP_CASES,
                         ids=[case_id((a, "F32", e)).replace("-F32", "") for a, e, _ in LLAMA_CPP_CASES])
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


# Contractions, digit runs (qwen2 splits them one by one, dbrx in threes,
# refact one by one), several spaces, tabs, newlines and non-ASCII letters.
BPE_TEXT = ("Once upon a time, there was a little girl named Lily. She loved the park!\n"
            "The sun was 12345 degrees; \"hello\" \u2014 caf\u00e9.  Two  spaces\tand tabs. It's 3.14, isn't it?\n\n")


@pytest.mark.parametrize("arch,pre", [("qwen3", "qwen2"), ("olmo2", "dbrx"), ("granite", "refact")])
def test_builtin_bpe_vocab_tokenizes_like_llama_cpp(tokenmill_bin, model_dir, arch, pre):
    """synth gives these architectures the byte-level BPE tokenizer their
    released models ship; tokenmill and llama.cpp read it the same way."""
    llama_cpp = require_module("llama_cpp", "llama-cpp-python", "the second tokenizer")
    path = synth(tokenmill_bin, model_dir, arch, "F32", ())
    from gguf import GGUFReader
    reader = GGUFReader(path)
    assert reader.get_field("tokenizer.ggml.model").contents() == "gpt2"
    assert reader.get_field("tokenizer.ggml.pre").contents() == pre
    ours = run_tokenmill(tokenmill_bin, "tokenize", "-m", path, input_text=BPE_TEXT).stdout
    ours = [int(t) for t in ours.replace("\n", ",").split(",") if t.strip()]
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    theirs = llm.tokenize(BPE_TEXT.encode(), add_bos=True, special=False)
    assert ours == theirs
    assert len(ours) < len(BPE_TEXT.encode()) * 0.8, "the merges should shorten the text"
    assert llm.detokenize(ours).decode() == BPE_TEXT
