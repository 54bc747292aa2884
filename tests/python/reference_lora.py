"""A LoRA adapter file read for the NumPy reference (reference_forward.py):
the dense delta each adapted base tensor gets, W' = W + scale * B @ A.

The file format is the GGUF adapter layout of llama.cpp's LoRA converter
(read here with the PyPI `gguf` package, nothing shared with tokenmill):
general.type = "adapter", adapter.type = "lora", adapter.lora.alpha, and per
adapted base tensor NAME the pair "NAME.lora_a" (GGUF dims [n_in, rank],
array (rank, n_in)) and "NAME.lora_b" (GGUF dims [rank, n_out], array
(n_out, rank)). A tensor fused in the base file (phi3's attn_qkv, and ffn_up
holding gate and up) has one pair for the whole fused matrix.

scale = user_scale * alpha / rank, with rank = B's column count; an alpha of
0 means "no alpha": scale = user_scale (llama.cpp's rule, which tokenmill
follows).
"""
import numpy as np
from fast_gguf_reader import FastGGUFReader

A_SUFFIX, B_SUFFIX = ".lora_a", ".lora_b"


def _field_value(reader, key):
    field = reader.get_field(key)
    return None if field is None else field.contents()


class LoraDeltas:
    """The adapter at `path`, as dense float64 deltas by base tensor name.

    `as_array(tensor)` turns a GGUFReader tensor into a float64 array in
    NumPy order (the reference's own reader, so adapter and base tensors
    are dequantized the same way)."""

    def __init__(self, path, as_array, user_scale=1.0):
        self.path = path
        reader = FastGGUFReader(path)
        if _field_value(reader, "general.type") != "adapter":
            raise ValueError(f"{path}: general.type is not 'adapter'")
        if _field_value(reader, "adapter.type") != "lora":
            raise ValueError(f"{path}: adapter.type is not 'lora'")
        self.arch = _field_value(reader, "general.architecture")
        self.alpha = float(_field_value(reader, "adapter.lora.alpha") or 0.0)
        self.user_scale = float(user_scale)
        tensors = {t.name: t for t in reader.tensors}
        self.pairs = {}  # base name -> (A (rank, n_in), B (n_out, rank))
        for name in tensors:
            if name.endswith(A_SUFFIX):
                base = name[: -len(A_SUFFIX)]
                if base + B_SUFFIX not in tensors:
                    raise ValueError(f"{path}: {name} without {base + B_SUFFIX}")
                self.pairs[base] = (as_array(tensors[name]), as_array(tensors[base + B_SUFFIX]))
            elif not name.endswith(B_SUFFIX):
                raise ValueError(f"{path}: {name} is not a LoRA tensor")
            elif name[: -len(B_SUFFIX)] + A_SUFFIX not in tensors:
                raise ValueError(f"{path}: {name} without its lora_a")
        for base, (a, b) in self.pairs.items():
            if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1]:
                raise ValueError(f"{path}: {base}: lora_a {a.shape} and lora_b {b.shape} do not chain")

    def rank(self, base):
        return self.pairs[base][1].shape[1]

    def scale(self, base):
        if self.alpha == 0.0:
            return self.user_scale
        return self.user_scale * self.alpha / self.rank(base)

    def delta(self, base):
        """scale * B @ A (n_out, n_in), or None when `base` is not adapted."""
        if base not in self.pairs:
            return None
        a, b = self.pairs[base]
        return self.scale(base) * (b @ a)

    def names(self):
        return sorted(self.pairs)


def merge(weights, deltas, name):
    """The base tensor `weights` (NumPy order) with the adapter's delta added,
    checked against its shape; `weights` itself when `name` is not adapted."""
    delta = None if deltas is None else deltas.delta(name)
    if delta is None:
        return weights
    if delta.shape != weights.shape:
        raise ValueError(f"{deltas.path}: delta of {name} is {delta.shape}, the base tensor {weights.shape}")
    return weights + delta
