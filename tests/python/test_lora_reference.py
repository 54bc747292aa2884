"""tokenmill with a LoRA adapter (`logits --lora FILE`) against the float64
NumPy reference with the adapter merged into the weights, W + scale * B @ A
(reference_forward.py with reference_lora.py; scale = user scale * alpha /
rank, or the user scale alone when alpha is 0).

The files (lora_cases.py) are tiny synthetic models of several
architectures and adapters from `tokenmill synth-lora` on them: ranks 4, 16
and 32, stored as f32, f16 and Q8_0, phi3's fused attn_qkv and ffn_up
adapted as whole matrices. tokenmill applies the low-rank product beside the
unchanged base matmul, the reference merges the delta: the same maths in a
different order.

Tolerances are test_arch_reference.py's, for the same reasons: float paths
(F32 base, f32 or f16 adapter) max |dlogit| < 1e-4; paths where tokenmill
quantizes activations (Q8_0 base or adapter) 2e-3 and the same top-1 at
every position. Each adapter must move the reference's logits by more than
100x the tolerance, so a `--lora` that is ignored, or a delta scaled or
placed wrongly, fails (test_reference_notices_lora_mistakes plants such
mistakes in the reference).

The same check on the real Gemma 3 270M is in test_lora_gemma.py.
"""
import numpy as np
import pytest
from gguf import GGUFReader

from lora_cases import (CASES, GGUF_TYPE_NAMES, NO_ALPHA, SOME_WITH_OUTPUT, LoraFiles, case_id, case_named,
                        prompt_ids, tokenmill_logits, uses_integer_path)
from reference_forward import ReferenceModel, tensor_values
from reference_lora import LoraDeltas
from test_arch_reference import INTEGER_PATH_TOLERANCE, TOLERANCE, assert_close

PROMPT_LEN = 40
MATERIAL = 100  # an adapter must move logits by this many tolerances


@pytest.fixture(scope="module")
def files(tokenmill_bin, tmp_path_factory):
    return LoraFiles(tokenmill_bin, tmp_path_factory.mktemp("lora_reference"))


def tolerance_of(case):
    return INTEGER_PATH_TOLERANCE if uses_integer_path(case) else TOLERANCE


def check_adapter_file(ref, case):
    """The adapter holds what the case asks for (no silent fallback)."""
    arch, _, _, rank, ltype, flags = case
    lora = ref.lora
    roles = {n.split(".", 2)[2] if n.startswith("blk.") else n for n in lora.names()}
    assert roles, f"{lora.path}: no adapted tensors"
    assert {lora.rank(n) for n in lora.names()} == {rank}
    types = {t.tensor_type.name for t in GGUFReader(lora.path).tensors}
    assert types == {GGUF_TYPE_NAMES[ltype]}, f"{lora.path}: tensor types {types}"
    if flags == NO_ALPHA:
        assert lora.alpha == 0.0
    if flags == SOME_WITH_OUTPUT:
        assert roles == {"attn_q.weight", "attn_v.weight", "ffn_down.weight", "output.weight"}, roles
    elif arch == "phi3":
        assert {"attn_qkv.weight", "ffn_up.weight"} <= roles, f"phi3 adapter adapts {sorted(roles)}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_adapter_logits_match_merged_reference(tokenmill_bin, files, tmp_path, case):
    base, adapter = files.adapter(case)
    ref_model = ReferenceModel(base, lora=adapter)
    check_adapter_file(ref_model, case)
    ids = prompt_ids(ref_model.n_vocab, PROMPT_LEN)
    ref = ref_model.forward(ids)
    tolerance = tolerance_of(case)
    moved = np.abs(ref - ReferenceModel(base).forward(ids)).max()
    print(f"\n{case_id(case)}: {len(ref_model.lora.names())} adapted tensors, scale "
          f"{ref_model.lora.scale(ref_model.lora.names()[0]):.3g}; the adapter moves logits by up to {moved:.3f}")
    assert moved > MATERIAL * tolerance, f"the adapter hardly changes the model ({moved:.2e})"
    out = str(tmp_path / "logits.npy")
    for what, batch in (("chunked -b 7", 7), ("decode -b 1", 1), ("one call -b 64", 64)):
        ours = tokenmill_logits(tokenmill_bin, base, ids, out, "-b", str(batch), "--lora", adapter)
        assert_close(ours, ref, f"{what} --lora", tolerance)
        if uses_integer_path(case):
            same = (ours.argmax(axis=1) == ref.argmax(axis=1)).mean()
            assert same == 1.0, f"{what}: top-1 agrees with the reference at {same:.1%} of positions"


# A user scale (--lora-scale) multiplies every delta; 0 gives the base model.
SCALE_CASES = [case_named(n) for n in ("llama-F32-r4-f32", "llama-F32-alpha0-r8-f32", "gemma3-F32-r32-q8_0")]


@pytest.mark.parametrize("case", SCALE_CASES, ids=case_id)
@pytest.mark.parametrize("user_scale", [0.5, 2.0])
def test_lora_scale_matches_reference(tokenmill_bin, files, tmp_path, case, user_scale):
    base, adapter = files.adapter(case)
    ref_model = ReferenceModel(base, lora=adapter, lora_scale=user_scale)
    ids = prompt_ids(ref_model.n_vocab, PROMPT_LEN)
    ours = tokenmill_logits(tokenmill_bin, base, ids, str(tmp_path / "l.npy"), "--lora", adapter,
                            "--lora-scale", str(user_scale))
    print(f"\n{case_id(case)} --lora-scale {user_scale}:")
    assert_close(ours, ref_model.forward(ids), f"--lora-scale {user_scale}", tolerance_of(case))


@pytest.mark.parametrize("case", SCALE_CASES, ids=case_id)
def test_lora_scale_zero_gives_the_base(tokenmill_bin, files, tmp_path, case):
    base, adapter = files.adapter(case)
    ids = prompt_ids(ReferenceModel(base).n_vocab, PROMPT_LEN)
    plain = tokenmill_logits(tokenmill_bin, base, ids, str(tmp_path / "base.npy"))
    zero = tokenmill_logits(tokenmill_bin, base, ids, str(tmp_path / "zero.npy"), "--lora", adapter,
                            "--lora-scale", "0")
    full = tokenmill_logits(tokenmill_bin, base, ids, str(tmp_path / "full.npy"), "--lora", adapter)
    diff, moved = np.abs(zero - plain).max(), np.abs(full - plain).max()
    print(f"\n{case_id(case)}: --lora-scale 0 vs base {diff:.2e}, --lora vs base {moved:.3f}")
    # The base products are the same either way; only a changed order of
    # summation could move them, by float32 rounding (observed: 0 exactly).
    assert diff < 1e-5, f"--lora-scale 0 is {diff:.3e} from the base model"
    assert moved > MATERIAL * tolerance_of(case), "--lora changes nothing"


# Mistakes an adapter implementation could make, planted in the reference's
# copy of the adapter: tokenmill must disagree with each by far more than
# the tolerance, which shows the comparison above can fail.
def _adapter_ignored(deltas, model):
    deltas.pairs.clear()


def _scale_without_rank(deltas, model):
    deltas.scale = lambda name: deltas.alpha  # alpha instead of alpha / rank


def _layers_swapped(deltas, model):
    for name in [n for n in deltas.pairs if n.startswith("blk.0.")]:
        other = "blk.1." + name[len("blk.0."):]
        deltas.pairs[name], deltas.pairs[other] = deltas.pairs[other], deltas.pairs[name]


def _fused_delta_on_q_rows_only(deltas, model):
    """phi3: the fused attn_qkv delta applied to the q rows alone."""
    q_dim = model.n_head * model.head_dim
    full = deltas.delta

    def delta(name):
        d = full(name)
        if d is not None and name.endswith("attn_qkv.weight"):
            d = d.copy()
            d[q_dim:] = 0.0
        return d
    deltas.delta = delta


MISTAKES = [("llama-F32-r4-f32", _adapter_ignored), ("llama-F32-r4-f32", _scale_without_rank),
            ("qwen2-F32-r16-f32", _layers_swapped), ("phi3-F32-r4-f32", _fused_delta_on_q_rows_only)]


@pytest.mark.parametrize("name,mistake", MISTAKES, ids=[f"{n}-{m.__name__.strip('_')}" for n, m in MISTAKES])
def test_reference_notices_lora_mistakes(tokenmill_bin, files, tmp_path, name, mistake):
    case = case_named(name)
    base, adapter = files.adapter(case)
    deltas = LoraDeltas(adapter, tensor_values)
    mistake(deltas, ReferenceModel(base))
    wrong_model = ReferenceModel(base, lora=deltas)
    ids = prompt_ids(wrong_model.n_vocab, PROMPT_LEN)
    ours = tokenmill_logits(tokenmill_bin, base, ids, str(tmp_path / "l.npy"), "--lora", adapter)
    wrong = wrong_model.forward(ids)
    diff = np.abs(ours - wrong).max()
    print(f"\n{case_id(case)} with {mistake.__name__.strip('_')}: max |dlogit| {diff:.3f}")
    assert diff > MATERIAL * tolerance_of(case)
