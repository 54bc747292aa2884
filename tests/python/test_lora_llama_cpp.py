"""tokenmill with a LoRA adapter against llama.cpp (llama-cpp-python's
`lora_path`) with the same adapter, on the files test_lora_reference.py
checks against the NumPy reference (lora_cases.py).

Each case: logits at every position of a fixed 96-token text from both
engines, compared by test_arch_llama_cpp.py's rule: top-1 agreement and
KL(llama.cpp || tokenmill) per position (mean and max) below its bounds.

- F32 base, f32 or f16 adapter: the F32 bounds (1e-6 mean / 1e-5 max).
  f32 adapters agree to float32 rounding (KL ~3e-13, max |dlogit| <= 7e-6).
  llama.cpp's CPU backend multiplies an f16 matrix by activations it first
  rounds to f16, tokenmill keeps them in float32; on the adapter's low-rank
  products alone that shows as KL <= 4.3e-8 mean / 3e-7 max (observed; max
  |dlogit| <= 3e-3), 23x / 33x under the bounds. Top-1 must agree wherever
  llama.cpp's lead exceeds twice what the rounding can move a logit by
  (in standard deviations of the row, ~1 here; granite's 0.125): 1e-4 for
  f32 adapters, 2e-2 for f16 -- random weights do make near-ties: with the
  llama rank-4 adapter at scale 0.5, position 62's two best logits are
  1.2e-6 apart in float64 and the scalar kernels' rounding swaps them.
- Q8_0 base or adapter: the Q8_0 bounds (1e-3 / 5e-3, top-1 at every
  position whose llama.cpp margin exceeds 0.1 standard deviations), since
  llama.cpp rounds activations to 8 bits there (observed <= 1.9e-4 / 5.4e-4).

Both sides must really apply the file: llama.cpp with the adapter must be
far (100x the KL bound) from llama.cpp without it, and on float cases the
float64 reference with the adapter merged must agree with llama.cpp within
test_arch_reference.py's bounds (1e-4 max |dlogit|; 1e-2 where llama.cpp
rounds to fp16), so that a misreading of the format shared by tokenmill
and the reference would be caught here.
"""
import os

import numpy as np
import pytest

from conftest import require_module
from lora_cases import CASES, LoraFiles, case_id, case_named, prompt_ids, tokenmill_logits
from reference_forward import ReferenceModel
from test_arch_llama_cpp import (F32_KL_MAX, F32_KL_MEAN, GGML_TYPE_F32, Q8_KL_MAX, Q8_KL_MEAN, Q8_MARGIN,
                                 compare_logits, kl_per_position)

llama_cpp = require_module("llama_cpp", "llama-cpp-python", "the llama.cpp comparison")

TEXT_LEN = 96
N_CTX = 128
MATERIAL = 100
# The float64 reference vs llama.cpp, as test_arch_reference.py bounds it;
# where llama.cpp rounds to fp16 (gemma's GELU table, the activations of f16
# adapters' products) it sits up to ~3e-3 away: 1e-2 there.
REFERENCE_BOUND = 1e-4
REFERENCE_BOUND_FP16 = 1e-2


@pytest.fixture(scope="module")
def files(tokenmill_bin, tmp_path_factory):
    return LoraFiles(tokenmill_bin, tmp_path_factory.mktemp("lora_llama_cpp"))


def llama_cpp_logits(model, ids, adapter=None, user_scale=1.0):
    """llama.cpp's logits at every position (F32 KV cache), with the adapter
    applied at `user_scale` when one is given."""
    lora = {"lora_path": adapter, "lora_scale": user_scale} if adapter else {}
    try:
        llm = llama_cpp.Llama(model_path=model, n_ctx=N_CTX, n_batch=N_CTX, n_threads=2, type_k=GGML_TYPE_F32,
                              type_v=GGML_TYPE_F32, logits_all=True, verbose=False, **lora)
    except (ValueError, RuntimeError) as exc:
        if adapter is None:
            raise
        pytest.skip(f"llama-cpp-python {llama_cpp.__version__} rejects {os.path.basename(adapter)}: {exc}")
    llm.eval(ids)
    logits = np.array(llm.scores[: len(ids)], dtype=np.float64)
    llm.close()
    return logits


# Top-1 margins of the float cases (see above), in standard deviations.
F32_ADAPTER_MARGIN = 1e-4
F16_ADAPTER_MARGIN = 2e-2


def top1_margin(case):
    """Below which llama.cpp lead a different top-1 is a near-tie."""
    ltype = case[4]
    if not float_case(case):
        return Q8_MARGIN
    return F16_ADAPTER_MARGIN if ltype == "f16" else F32_ADAPTER_MARGIN


def float_case(case):
    """No 8-bit activations on either side (llama.cpp rounds f16 adapters'
    activations to f16 only)."""
    _, wtype, _, _, ltype, _ = case
    return wtype == "F32" and ltype != "q8_0"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_adapter_logits_match_llama_cpp(tokenmill_bin, files, tmp_path, case):
    base, adapter = files.adapter(case)
    ref_base = ReferenceModel(base)
    ids = prompt_ids(ref_base.n_vocab, TEXT_LEN)
    theirs = llama_cpp_logits(base, ids, adapter)
    without = llama_cpp_logits(base, ids)
    ours = tokenmill_logits(tokenmill_bin, base, ids, str(tmp_path / "lora.npy"), "--lora", adapter)
    floats = float_case(case)
    kl_mean, kl_max = (F32_KL_MEAN, F32_KL_MAX) if floats else (Q8_KL_MEAN, Q8_KL_MAX)
    applied = kl_per_position(without, theirs).mean()
    print(f"\n{case_id(case)}: llama.cpp with vs without the adapter: KL mean {applied:.3e}")
    assert applied > MATERIAL * kl_mean, "llama.cpp's logits hardly change with the adapter: is it applied?"
    compare_logits(case_id(case), theirs, ours, kl_mean, kl_max, top1_margin(case))
    if floats:
        exact = ReferenceModel(base, lora=adapter).forward(ids)
        diff = np.abs(theirs - exact).max()
        fp16_rounding = ref_base.arch in ("gemma3", "gemma2") or case[4] == "f16"
        bound = REFERENCE_BOUND_FP16 if fp16_rounding else REFERENCE_BOUND
        print(f"  float64 reference vs llama.cpp, both with the adapter: max |dlogit| {diff:.2e}")
        assert diff < bound


@pytest.mark.parametrize("user_scale", [0.5, 0.0])
def test_lora_scale_matches_llama_cpp(tokenmill_bin, files, tmp_path, user_scale):
    case = case_named("llama-F32-r4-f32")
    base, adapter = files.adapter(case)
    ids = prompt_ids(ReferenceModel(base).n_vocab, TEXT_LEN)
    theirs = llama_cpp_logits(base, ids, adapter, user_scale)
    ours = tokenmill_logits(tokenmill_bin, base, ids, str(tmp_path / "l.npy"), "--lora", adapter,
                            "--lora-scale", str(user_scale))
    print(f"\n{case_id(case)} scale {user_scale}:")
    compare_logits(f"scale {user_scale}", theirs, ours, F32_KL_MEAN, F32_KL_MAX, top1_margin(case))
