"""tokenmill against llama.cpp (llama-cpp-python) on every architecture
tokenmill runs, and on RoPE scaling past the original context.

Each case is a synthetic model written by `tokenmill synth` (context 512),
run by both engines on the same 256-token text (fixed random ids: the
weights are random, so real text would be no more telling):

- logits at every position: top-1 agreement at 100% of positions, and
  KL(llama.cpp || tokenmill) per position, mean and max, below a bound;
- greedy continuations of 32 tokens after the text: identical ids
  (tokenmill `run --temp 0`, llama.cpp argmax of its own logits).

Bounds, from what the existing architectures (llama, qwen2, gemma3) show:
- F32 weights: both engines compute in float32 (llama.cpp with an F32 KV
  cache), KL is float32 rounding: observed <= 5e-13 mean / 5e-12 max on
  llama/qwen2; gemma's GELU, which llama.cpp's CPU backend reads from an fp16
  table, gives up to 8e-8 mean / 2.5e-7 max. Bounds 1e-6 mean / 1e-5 max:
  12x / 40x above the worst observed, 1e5x below what a misread RoPE scaling
  gives (test_llama_cpp_comparison_notices_wrong_scaling: 0.36 / 1.2).
- Q8_0 weights: llama.cpp quantizes the activations to 8 bits (Q8_0 blocks)
  before each product, tokenmill to 16 bits (or not at all), so the two
  differ by llama.cpp's activation rounding: observed KL <= 2.3e-4 mean /
  1.1e-3 max, |dlogit| up to 0.14 of the row's standard deviation. Bounds
  1e-3 mean / 5e-3 max. Random-weight models have near-ties, where either
  pick is right: the top-1 flips observed all had llama.cpp's top-2 margin
  below 0.065 standard deviations of its logits row. So top-1 must agree at
  every position whose margin exceeds Q8_MARGIN = 0.1 standard deviations
  (70-87% of them), and at >= 90% of all positions; greedy continuations
  must be identical, or diverge only at a step whose margin is below it.

Mixture of experts (qwen2moe, qwen3moe, olmoe, llama with experts): F32
files as above. Routing is a discrete choice: where a token's router logits
nearly tie between its last chosen expert and the next one, a small error
upstream sends it to another expert and its logits move by O(0.1..1).
llama.cpp's 8-bit activations do that on Q8_0 files at about 1 position in
20; tokenmill's 16-bit ones only where the float64 reference's gap is below
COIN_FLIP (1e-3; observed flip at a gap of 1.5e-5). So on Q8_0 MoE files the
float64 reference arbitrates (compare_moe_q8): tokenmill matches it (KL
below the F32 bound) up to its first coin-flip position; every position
where tokenmill and llama.cpp disagree beyond the Q8 max bound or in top-1
must be one where llama.cpp is the further from the reference; top-1 meets
the Q8 bound overall and KL the mean bound over the undisputed positions; a greedy continuation may part from
llama.cpp only where the reference picks tokenmill's token.

RoPE scaling (linear, llama3 rope_freqs, YaRN with and without an attention
factor, phi3 LongRoPE with its long and its short factors) is tested on
files whose original context is 64 and factor 4 (YaRN also 8), so positions
64..255 of the text lie past it; tokenmill and llama.cpp are both also
checked against the float64 NumPy reference (reference_forward.py). The
command-line overrides (--rope-scale, --rope-scaling yarn, --rope-freq-base,
-c past the trained context) are checked against llama.cpp given the same
settings.
"""
import os

import numpy as np
import pytest

from conftest import require_module, run_tokenmill
from reference_forward import ReferenceModel

llama_cpp = require_module("llama_cpp", "llama-cpp-python", "the llama.cpp comparison")

TEXT_LEN = 256
GREEDY_TOKENS = 32
CTX = 512
TEXT_SEED = 2026
GGML_TYPE_F32 = 0
LLAMA_ROPE_SCALING_LINEAR = 1
LLAMA_ROPE_SCALING_YARN = 2

F32_KL_MEAN, F32_KL_MAX = 1e-6, 1e-5
Q8_KL_MEAN, Q8_KL_MAX = 1e-3, 5e-3
Q8_MARGIN = 0.1  # in standard deviations of llama.cpp's logits row
Q8_TOP1_MIN = 0.9
REFERENCE_TOLERANCE = 1e-4  # max |dlogit| against float64 (test_arch_reference.py's)
COIN_FLIP = 1e-3  # router logit gap tokenmill's 16-bit activations may flip

ARCHS = ["llama", "qwen2", "gemma3", "qwen3", "olmo2", "granite", "phi3", "gemma2", "qwen2moe", "qwen3moe", "olmoe",
         "mixtral"]
# Six layers give gemma3 a global layer among its sliding-window ones;
# "mixtral" is a llama file with experts (8, 2 per token, as Mixtral).
ARCH_EXTRA = {"gemma3": ("--n-layer", "6"), "mixtral": ("--n-expert", "8", "--n-expert-used", "2")}
SYNTH_ARCH = {"mixtral": "llama"}

# (name, arch, synth flags, llama.cpp context options)
ROPE_CASES = [
    ("linear-x4", "llama", ("--rope-scaling", "linear", "--rope-factor", "4"), {}),
    ("llama3-x4", "llama", ("--rope-scaling", "llama3", "--rope-factor", "4", "--rope-orig-ctx", "64"), {}),
    ("yarn-x4", "llama", ("--rope-scaling", "yarn", "--rope-factor", "4", "--rope-orig-ctx", "64"), {}),
    ("yarn-x8-attn0.8-qwen2", "qwen2",
     ("--rope-scaling", "yarn", "--rope-factor", "8", "--rope-orig-ctx", "64", "--rope-attn-factor", "0.8"), {}),
    ("yarn-x4-qwen3", "qwen3", ("--rope-scaling", "yarn", "--rope-factor", "4", "--rope-orig-ctx", "64"), {}),
    ("linear-x4-gemma3", "gemma3", ("--n-layer", "6", "--rope-scaling", "linear", "--rope-factor", "4"), {}),
    # Phi-3 LongRoPE: context 512 past the original 64 takes the long
    # factors (and Phi-3's attention factor); original 512, the short ones.
    ("longrope-long-phi3", "phi3", ("--rope-scaling", "longrope", "--rope-factor", "4", "--rope-orig-ctx", "64"), {}),
    ("longrope-short-phi3", "phi3", ("--rope-scaling", "longrope", "--rope-factor", "4", "--rope-orig-ctx", "512"),
     {}),
]

# (name, arch, tokenmill flags, llama.cpp context options) on unscaled files.
OVERRIDE_CASES = [
    ("rope-scale", "llama", ("--rope-scale", "4"), {"rope_freq_scale": 0.25}),
    ("yarn", "llama", ("--rope-scaling", "yarn", "--rope-scale", "4", "--yarn-orig-ctx", "64"),
     {"rope_scaling_type": LLAMA_ROPE_SCALING_YARN, "rope_freq_scale": 0.25, "yarn_orig_ctx": 64}),
    ("freq-base", "llama", ("--rope-freq-base", "500"), {"rope_freq_base": 500.0}),
    # Sliding-window layers keep the file's base and scale (llama.cpp's *_swa).
    ("scale-and-base-gemma2", "gemma2", ("--rope-scale", "2", "--rope-freq-base", "500"),
     {"rope_freq_scale": 0.5, "rope_freq_base": 500.0}),
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("arch_llama_cpp")


_models = {}


def synth(binary, directory, name, arch, wtype, extra):
    key = (name, arch, wtype, extra)
    if key not in _models:
        path = os.path.join(directory, f"{name}-{arch}-{wtype}.gguf")
        run_tokenmill(binary, "synth", "--arch", SYNTH_ARCH.get(arch, arch), "--preset", "tiny", "--type", wtype, "--ctx", str(CTX),
                      "--seed", "5", *extra, "-o", path, timeout=120)
        _models[key] = path
    return _models[key]


def text_ids(n_vocab):
    # Past the usual special ids (0..2), which some engines treat specially.
    return np.random.default_rng(TEXT_SEED).integers(3, n_vocab, TEXT_LEN).tolist()


def n_vocab_of(path):
    return ReferenceModel(path).n_vocab


def tokenmill_logits(binary, path, ids, out, *flags):
    run_tokenmill(binary, "logits", "-m", path, "--prompt-ids", ",".join(map(str, ids)), "-o", out, "-t", "2",
                  *flags, timeout=120)
    return np.load(out).astype(np.float64)


def tokenmill_greedy(binary, path, ids, *flags):
    proc = run_tokenmill(binary, "run", "-m", path, "--prompt-ids", ",".join(map(str, ids)), "-n",
                         str(GREEDY_TOKENS), "--temp", "0", "--ignore-eos", "--print-ids", "--kv-dtype", "f32",
                         "-c", str(CTX), "-t", "2", *flags, timeout=120)
    return [int(t) for t in proc.stdout.strip().split(",") if t]


class LlamaCpp:
    """llama.cpp on one file: logits of the text, then its greedy continuation."""

    def __init__(self, path, n_ctx=CTX, **context):
        self.llm = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_batch=CTX, n_threads=2, type_k=GGML_TYPE_F32,
                                   type_v=GGML_TYPE_F32, logits_all=True, verbose=False, **context)

    def logits(self, ids):
        self.llm.reset()
        self.llm.eval(ids)
        return np.array(self.llm.scores[: len(ids)], dtype=np.float64)

    def greedy(self, ids, n):
        """The continuation and, per step, the top-1 margin over the runner-up."""
        self.llm.reset()
        self.llm.eval(ids)
        out, margins = [], []
        for _ in range(n):
            row = np.array(self.llm.scores[self.llm.n_tokens - 1], dtype=np.float64)
            top = int(np.argmax(row))  # ties to the lower id, as tokenmill's greedy rule
            out.append(top)
            margins.append(float(margins_of(row)[0]))
            self.llm.eval([top])
        return out, margins


def log_softmax(x):
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def kl_per_position(theirs, ours):
    """KL(llama.cpp || tokenmill) at each position, in nats."""
    p, q = log_softmax(theirs), log_softmax(ours)
    return (np.exp(p) * (p - q)).sum(axis=1)


def margins_of(logits):
    """Top-1 lead over the runner-up, in standard deviations of the row."""
    logits = np.atleast_2d(logits)
    part = np.partition(logits, -2, axis=1)
    return (part[:, -1] - part[:, -2]) / logits.std(axis=1)


def reference_logits(path, ids):
    return ReferenceModel(path).forward(ids)


def compare_moe_q8(what, path, ids, theirs, ours):
    """The float64 reference arbitrates between the two engines (see the
    module notes)."""
    model = ReferenceModel(path)
    ref = model.forward(ids)
    coin_flip = np.array(model.router_gaps).min(axis=0) < COIN_FLIP
    ours_err, theirs_err = kl_per_position(ref, ours), kl_per_position(ref, theirs)
    # tokenmill follows the reference up to its first coin flip, if any.
    off = np.flatnonzero(ours_err > F32_KL_MAX)
    upto = int(off[0]) if off.size else len(ids)
    print(f"  {what}: tokenmill vs the reference: KL max {ours_err[:upto].max():.2e} up to position {upto} "
          f"(coin flips at {np.flatnonzero(coin_flip)[:5].tolist()}); llama.cpp vs the reference: KL max "
          f"{theirs_err.max():.2e}")
    assert upto == len(ids) or coin_flip[upto], f"{what}: tokenmill leaves the reference at position {upto}"
    kl = kl_per_position(theirs, ours)[:upto]
    same = (ours.argmax(axis=1) == theirs.argmax(axis=1))[:upto]
    disputed = (kl > Q8_KL_MAX) | ~same
    ours_to_blame = disputed & (ours_err[:upto] > np.maximum(theirs_err[:upto], 1e-6))
    print(f"  {what}: top-1 {same.mean():.1%}, KL mean {kl.mean():.2e} max {kl.max():.2e}; {int(disputed.sum())} "
          f"disputed positions, tokenmill the further from the reference at {int(ours_to_blame.sum())}; KL mean "
          f"elsewhere {kl[~disputed].mean():.2e}")
    assert not ours_to_blame.any(), f"{what}: tokenmill is the further from the reference at {np.flatnonzero(ours_to_blame)[:10]}"
    assert same.mean() >= Q8_TOP1_MIN and kl[~disputed].mean() < Q8_KL_MEAN


def compare_logits(what, theirs, ours, kl_mean_bound, kl_max_bound, margin=0.0):
    """Checks top-1 and KL; returns the figures printed."""
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape}, llama.cpp {theirs.shape}"
    assert np.isfinite(ours).all(), f"{what}: non-finite logits"
    kl = kl_per_position(theirs, ours)
    same = ours.argmax(axis=1) == theirs.argmax(axis=1)
    decisive = margins_of(theirs) > margin
    print(f"  {what}: top-1 {same.mean():.1%} (decisive positions {same[decisive].mean():.1%} of "
          f"{decisive.sum()}), KL mean {kl.mean():.2e} max {kl.max():.2e} at {int(kl.argmax())}, "
          f"max |dlogit| {np.abs(ours - theirs).max():.2e}")
    bad = np.flatnonzero(~same & decisive)
    assert bad.size == 0, f"{what}: top-1 differs at positions {bad[:10].tolist()} (llama.cpp margin > {margin})"
    assert same.mean() >= (1.0 if margin == 0.0 else Q8_TOP1_MIN), f"{what}: top-1 agrees at {same.mean():.1%}"
    assert kl.mean() < kl_mean_bound, f"{what}: mean KL {kl.mean():.3e} >= {kl_mean_bound}"
    assert kl.max() < kl_max_bound, f"{what}: max KL {kl.max():.3e} >= {kl_max_bound} at {int(kl.argmax())}"


def compare_greedy(what, theirs, margins, ours, margin=0.0, arbiter=None):
    """arbiter(step, token): whether the float64 reference picks `token` at
    the step (then the continuations may part there)."""
    print(f"  {what} greedy: llama.cpp {theirs[:8]}..., tokenmill {ours[:8]}...")
    assert len(ours) == len(theirs), f"{what}: tokenmill generated {len(ours)} tokens, llama.cpp {len(theirs)}"
    for step, (a, b) in enumerate(zip(theirs, ours)):
        if a != b:
            if arbiter is not None and arbiter(step, b):
                print(f"  {what}: continuations part at step {step}, where the reference picks tokenmill's token")
                return
            assert margins[step] <= margin, (
                f"{what}: greedy continuations differ at step {step} (llama.cpp {a}, tokenmill {b}; "
                f"llama.cpp's margin {margins[step]:.3f})")
            return  # past a near-tie the two texts are different prompts


@pytest.mark.parametrize("wtype", ["F32", "Q8_0"])
@pytest.mark.parametrize("arch", ARCHS)
def test_architecture_matches_llama_cpp(tokenmill_bin, model_dir, arch, wtype):
    path = synth(tokenmill_bin, model_dir, "arch", arch, wtype, ARCH_EXTRA.get(arch, ()))
    ids = text_ids(n_vocab_of(path))
    ours = tokenmill_logits(tokenmill_bin, path, ids, os.path.join(model_dir, "out.npy"))
    cpp = LlamaCpp(path)
    print(f"\n{arch} {wtype}:")
    f32 = wtype == "F32"
    theirs_logits = cpp.logits(ids)
    arbiter = None
    if not f32 and ReferenceModel(path).n_expert:
        compare_moe_q8(f"{arch} {wtype}", path, ids, theirs_logits, ours)
        arbiter = lambda step, token: int(np.argmax(reference_logits(path, ids + theirs[:step])[-1])) == token
    else:
        compare_logits(f"{arch} {wtype}", theirs_logits, ours, F32_KL_MEAN if f32 else Q8_KL_MEAN,
                       F32_KL_MAX if f32 else Q8_KL_MAX, 0.0 if f32 else Q8_MARGIN)
    theirs, margins = cpp.greedy(ids, GREEDY_TOKENS)
    compare_greedy(f"{arch} {wtype}", theirs, margins, tokenmill_greedy(tokenmill_bin, path, ids),
                   0.0 if f32 else Q8_MARGIN, arbiter)


@pytest.mark.parametrize("case", ROPE_CASES, ids=[c[0] for c in ROPE_CASES])
def test_rope_scaling_past_original_context(tokenmill_bin, model_dir, case):
    name, arch, flags, context = case
    path = synth(tokenmill_bin, model_dir, name, arch, "F32", flags)
    ref_model = ReferenceModel(path)
    ids = text_ids(ref_model.n_vocab)
    ours = tokenmill_logits(tokenmill_bin, path, ids, os.path.join(model_dir, "out.npy"))
    ref = ref_model.forward(ids)
    cpp = LlamaCpp(path, **context)
    theirs = cpp.logits(ids)
    print(f"\n{name}: tokenmill vs reference {np.abs(ours - ref).max():.2e}, "
          f"llama.cpp vs reference {np.abs(theirs - ref).max():.2e}")
    assert np.abs(ours - ref).max() < REFERENCE_TOLERANCE
    gelu_table = 1e-2 if arch.startswith("gemma") else REFERENCE_TOLERANCE  # see test_arch_reference.py
    assert np.abs(theirs - ref).max() < gelu_table
    compare_logits(name, theirs, ours, F32_KL_MEAN, F32_KL_MAX)
    greedy, margins = cpp.greedy(ids, GREEDY_TOKENS)
    compare_greedy(name, greedy, margins, tokenmill_greedy(tokenmill_bin, path, ids))


@pytest.mark.parametrize("case", OVERRIDE_CASES, ids=[c[0] for c in OVERRIDE_CASES])
def test_rope_overrides_match_llama_cpp(tokenmill_bin, model_dir, case):
    name, arch, flags, context = case
    path = synth(tokenmill_bin, model_dir, "plain", arch, "F32", ())
    ids = text_ids(n_vocab_of(path))
    ours = tokenmill_logits(tokenmill_bin, path, ids, os.path.join(model_dir, "out.npy"), *flags)
    plain = tokenmill_logits(tokenmill_bin, path, ids, os.path.join(model_dir, "plain.npy"))
    print(f"\noverride {name}:")
    assert np.abs(ours - plain).max() > 0.1, "the override changed nothing"
    cpp = LlamaCpp(path, **context)
    compare_logits(f"override {name}", cpp.logits(ids), ours, F32_KL_MEAN, F32_KL_MAX)
    greedy, margins = cpp.greedy(ids, GREEDY_TOKENS)
    compare_greedy(f"override {name}", greedy, margins, tokenmill_greedy(tokenmill_bin, path, ids, *flags))


def test_longrope_factors_follow_the_context(tokenmill_bin, model_dir):
    """-c past the original context switches a LongRoPE model to its long
    factors, as llama.cpp does for a context of that size."""
    name, arch, flags, _ = ROPE_CASES[-1]  # original context 512: short factors by default
    path = synth(tokenmill_bin, model_dir, name, arch, "F32", flags)
    ids = text_ids(n_vocab_of(path))
    short = tokenmill_logits(tokenmill_bin, path, ids, os.path.join(model_dir, "out.npy"))
    long = tokenmill_logits(tokenmill_bin, path, ids, os.path.join(model_dir, "long.npy"), "-c", "1024")
    assert np.abs(long - short).max() > 0.1
    print("\nlongrope with -c 1024:")
    compare_logits("longrope -c 1024", LlamaCpp(path, n_ctx=1024).logits(ids), long, F32_KL_MEAN, F32_KL_MAX)


# The comparisons above can fail: a llama.cpp that reads a YaRN file as
# linear, or the reference without YaRN's ramp or attention temperature, or
# without the llama3 factors, is far outside the bounds.
def test_llama_cpp_comparison_notices_wrong_scaling(tokenmill_bin, model_dir):
    name, arch, flags, _ = ROPE_CASES[2]
    path = synth(tokenmill_bin, model_dir, name, arch, "F32", flags)
    ids = text_ids(n_vocab_of(path))
    ours = tokenmill_logits(tokenmill_bin, path, ids, os.path.join(model_dir, "out.npy"))
    wrong = LlamaCpp(path, rope_scaling_type=LLAMA_ROPE_SCALING_LINEAR).logits(ids)
    kl = kl_per_position(wrong, ours)
    print(f"\nyarn file read as linear by llama.cpp: KL mean {kl.mean():.2e} max {kl.max():.2e}")
    assert kl.mean() > 100 * F32_KL_MEAN and kl.max() > 100 * F32_KL_MAX


def _no_yarn_ramp(m):
    m.rope_scaling.yarn = False  # plain position interpolation, no temperature


def _no_yarn_temperature(m):
    m.rope_scaling.attn_factor /= 1.0 + 0.1 * np.log(m.rope_scaling.factor)


def _no_llama3_factors(m):
    m.rope_scaling.freq_factors = None


@pytest.mark.parametrize("case,mistake", [(2, _no_yarn_ramp), (2, _no_yarn_temperature), (1, _no_llama3_factors)],
                         ids=["yarn-ramp", "yarn-temperature", "llama3-factors"])
def test_reference_notices_wrong_scaling(tokenmill_bin, model_dir, case, mistake):
    name, arch, flags, _ = ROPE_CASES[case]
    path = synth(tokenmill_bin, model_dir, name, arch, "F32", flags)
    ref_model = ReferenceModel(path)
    ids = text_ids(ref_model.n_vocab)
    ours = tokenmill_logits(tokenmill_bin, path, ids, os.path.join(model_dir, "out.npy"))
    mistake(ref_model)
    diff = np.abs(ours - ref_model.forward(ids)).max()
    print(f"\n{name} with {mistake.__name__.strip('_')}: max |dlogit| {diff:.3f}")
    assert diff > 100 * REFERENCE_TOLERANCE


def test_context_beyond_training_warns(tokenmill_bin, model_dir):
    """-c past the trained context runs, with a warning when RoPE is not
    scaled and none when it is; without -c such a prompt is refused."""
    path = os.path.join(model_dir, "short.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "llama", "--ctx", "128", "-o", path)
    ids = ",".join(str(i) for i in text_ids(512)[:200])
    out = os.path.join(model_dir, "short.npy")
    refused = run_tokenmill(tokenmill_bin, "logits", "-m", path, "--prompt-ids", ids, "-o", out, check=False)
    assert refused.returncode != 0 and "128" in refused.stderr
    warned = run_tokenmill(tokenmill_bin, "logits", "-m", path, "--prompt-ids", ids, "-o", out, "-c", "256")
    assert "exceeds the 128 positions the model was trained on" in warned.stderr
    assert np.load(out).shape == (200, 512)
    scaled = run_tokenmill(tokenmill_bin, "logits", "-m", path, "--prompt-ids", ids, "-o", out, "-c", "256",
                           "--rope-scaling", "yarn", "--rope-scale", "2")
    assert "warning" not in scaled.stderr
    run = run_tokenmill(tokenmill_bin, "run", "-m", path, "--prompt-ids", ids, "-c", "256", "-n", "2", "--temp", "0",
                        "--print-ids")
    assert "exceeds the 128 positions" in run.stderr
    bad = run_tokenmill(tokenmill_bin, "logits", "-m", path, "--prompt-ids", "1,2", "-o", out, "--rope-scale", "0",
                        check=False)
    assert bad.returncode != 0 and "--rope-scale" in bad.stderr


def test_synth_llama3_factors_follow_llama_3_1(tokenmill_bin, model_dir):
    """The rope_freqs tensor `synth --rope-scaling llama3` writes holds Llama
    3.1's divisors (its published rope_scaling rule: low_freq_factor 1,
    high_freq_factor 4), so the llama3 cases above test the real thing."""
    name, arch, flags, _ = ROPE_CASES[1]
    path = synth(tokenmill_bin, model_dir, name, arch, "F32", flags)
    m = ReferenceModel(path)
    factor, old_ctx, low, high = 4.0, 64.0, 1.0, 4.0
    expected = []
    for i in range(m.rope_dims // 2):
        freq = m.rope_base ** (-2.0 * i / m.rope_dims)
        wavelen = 2 * np.pi / freq
        if wavelen < old_ctx / high:
            new = freq
        elif wavelen > old_ctx / low:
            new = freq / factor
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            new = (1 - smooth) * freq / factor + smooth * freq
        expected.append(freq / new)
    np.testing.assert_allclose(m.rope_scaling.freq_factors, expected, rtol=1e-6)
    assert m.rope_scaling.freq_factors.min() == 1.0 and m.rope_scaling.freq_factors.max() == factor
