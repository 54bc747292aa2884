"""The synthetic base models and LoRA adapters that test_lora_reference.py
and test_lora_llama_cpp.py check tokenmill's `--lora` on: the same files go
to the float64 NumPy reference and to llama.cpp.

Bases come from `tokenmill synth --preset tiny` (2 layers, n_embd 64, n_ff
128, 512 tokens), adapters from `tokenmill synth-lora` on them. Ranks 4 and
16 in f32 and f16; Q8_0 stores lora_b [n_out, rank] in blocks of 32 along
the rank, so its cases use rank 32.
"""
import os

import numpy as np

from conftest import run_tokenmill

SIX_LAYERS = ("--n-layer", "6")  # gemma3: five sliding-window layers, then a global one
WIDE_HEADS = ("--head-dim", "32")  # qwen3: head size decoupled from n_embd / n_head

# (arch, base weights, synth flags, rank, adapter type, further synth-lora flags).
# synth-lora adapts every layer's linears unless --targets says otherwise.
NO_ALPHA = ("--alpha", "0")  # the scale is the user scale alone
SOME_WITH_OUTPUT = ("--targets", "attn_q,attn_v,ffn_down,output")
CASES = [
    ("llama", "F32", (), 4, "f32", ()),
    ("llama", "F32", (), 16, "f16", ()),
    ("llama", "F32", (), 8, "f32", NO_ALPHA),
    ("llama", "F32", (), 8, "f32", SOME_WITH_OUTPUT),
    ("llama", "Q8_0", (), 32, "q8_0", ()),
    ("qwen2", "F32", (), 16, "f32", ()),
    ("qwen2", "F32", (), 4, "f16", ()),
    ("gemma3", "F32", SIX_LAYERS, 16, "f32", ()),
    ("gemma3", "F32", (), 32, "q8_0", ()),
    # phi3: the fused attn_qkv and ffn_up (gate and up) carry one pair each.
    ("phi3", "F32", (), 4, "f32", ()),
    ("phi3", "F32", (), 16, "f16", ()),
    ("phi3", "F32", (), 32, "q8_0", ()),
    ("qwen3", "F32", WIDE_HEADS, 16, "f32", ()),
    ("gemma2", "F32", (), 4, "f16", ()),
    ("olmo2", "F32", (), 16, "f32", ()),
    ("granite", "F32", (), 4, "f32", ("--strength", "1")),  # its logits are small: a stronger delta
]

# Types as the `gguf` package names them, by synth-lora's --type.
GGUF_TYPE_NAMES = {"f32": "F32", "f16": "F16", "q8_0": "Q8_0"}


def case_id(case):
    arch, wtype, extra, rank, ltype, flags = case
    suffix = "-6layers" if "--n-layer" in extra else ""
    suffix += "-widehead" if "--head-dim" in extra else ""
    suffix += "-alpha0" if flags == NO_ALPHA else ""
    suffix += "-with-output" if flags == SOME_WITH_OUTPUT else ""
    return f"{arch}-{wtype}{suffix}-r{rank}-{ltype}"


def case_named(name):
    """The case whose case_id is `name`."""
    return next(c for c in CASES if case_id(c) == name)


def uses_integer_path(case):
    """Whether tokenmill quantizes activations somewhere in this case (Q8_0
    base weights or adapter): the looser tolerances apply."""
    _, wtype, _, _, ltype, _ = case
    return wtype == "Q8_0" or ltype == "q8_0"


class LoraFiles:
    """Writes each base model and adapter once per test module, into `directory`."""

    def __init__(self, binary, directory):
        self.binary = binary
        self.directory = str(directory)
        self._done = {}

    def base(self, arch, wtype, extra):
        key = ("base", arch, wtype, extra)
        if key not in self._done:
            name = f"{arch}-{wtype}{'-'.join(('',) + extra)}.gguf"
            path = os.path.join(self.directory, name)
            run_tokenmill(self.binary, "synth", "--arch", arch, "--preset", "tiny", "--type", wtype, "--seed", "1",
                          *extra, "-o", path, timeout=120)
            self._done[key] = path
        return self._done[key]

    def adapter(self, case, seed=11):
        """(base path, adapter path) of a case."""
        arch, wtype, extra, rank, ltype, flags = case
        base = self.base(arch, wtype, extra)
        key = ("lora", case, seed)
        if key not in self._done:
            path = os.path.join(self.directory, f"{case_id(case)}-s{seed}.lora.gguf")
            run_tokenmill(self.binary, "synth-lora", "-m", base, "-o", path, "--rank", str(rank), "--type", ltype,
                          "--seed", str(seed), *flags, timeout=120)
            self._done[key] = path
        return base, self._done[key]


def prompt_ids(n_vocab, length, seed=4321):
    """Fixed random ids past the usual special ids (0..2)."""
    return np.random.default_rng(seed).integers(3, n_vocab, length).tolist()


def tokenmill_logits(binary, model, ids, out, *flags):
    """`tokenmill logits` at every prompt position, float64 [len(ids), n_vocab]."""
    run_tokenmill(binary, "logits", "-m", model, "--prompt-ids", ",".join(map(str, ids)), "-o", out, "-t", "2",
                  *flags, timeout=120)
    logits = np.load(out)
    assert logits.dtype == np.float32
    return logits.astype(np.float64)

