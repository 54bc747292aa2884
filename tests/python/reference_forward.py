"""An independent NumPy reference of the decoder forward pass of the three
architectures tokenmill runs (llama, qwen2, gemma3), for tests.

Written from the architectures' published definitions (the Llama, Qwen2 and
Gemma 3 papers / model cards, and the GGUF tensor naming and layout
conventions), not from tokenmill's C++: weights are read with the PyPI `gguf`
package (GGUFReader) and quantized tensors are dequantized with
`gguf.quants.dequantize`, so nothing here shares code with tokenmill.

Everything is computed in float64 over the whole prompt at once (no KV
cache, no chunking): the causal mask and the sliding window are explicit
masks over a [T, T] score matrix.

Usage:
    model = ReferenceModel("model.gguf")
    logits = model.forward([1, 2, 3])   # float64 [num_tokens, n_vocab]
"""
import math

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

# Gemma 3 interleaves five sliding-window ("local") layers with one global
# layer, and its local layers use a fixed RoPE base of 10 000 (the global
# layers use the file's rope.freq_base). Neither is stored in GGUF files.
GEMMA3_GLOBAL_EVERY = 6
GEMMA3_LOCAL_ROPE_BASE = 10000.0

SUPPORTED_ARCHS = ("llama", "qwen2", "gemma3")


def _field_value(reader, key):
    """Scalar or string value of a metadata key, or None when absent."""
    field = reader.get_field(key)
    if field is None:
        return None
    return field.contents()


class ReferenceModel:
    def __init__(self, path):
        self.path = path
        reader = GGUFReader(path)
        self._tensors = {t.name: t for t in reader.tensors}
        arch = _field_value(reader, "general.architecture")
        if arch not in SUPPORTED_ARCHS:
            raise ValueError(f"{path}: unsupported architecture {arch!r}")
        self.arch = arch

        def get(key, default=None):
            v = _field_value(reader, f"{arch}.{key}")
            if v is None:
                if default is None:
                    raise KeyError(f"{path}: missing {arch}.{key}")
                return default
            return v

        self.n_embd = int(get("embedding_length"))
        self.n_layer = int(get("block_count"))
        self.n_ff = int(get("feed_forward_length"))
        self.n_head = int(get("attention.head_count"))
        self.n_kv_head = int(get("attention.head_count_kv", self.n_head))
        self.head_dim = int(get("attention.key_length", self.n_embd // self.n_head))
        self.rope_dims = int(get("rope.dimension_count", self.head_dim))
        self.rope_base = float(get("rope.freq_base", 10000.0))
        self.eps = float(get("attention.layer_norm_rms_epsilon", 1e-5))
        self.sliding_window = int(get("attention.sliding_window", 0)) if arch == "gemma3" else 0
        # Architecture traits; tests flip them to show the comparison notices.
        self.rope_neox = arch in ("qwen2", "gemma3")
        self.gemma3_local_rope_base = GEMMA3_LOCAL_ROPE_BASE
        scaling = _field_value(reader, f"{arch}.rope.scaling.type") or "none"
        if scaling == "linear":
            self.rope_pos_scale = 1.0 / float(get("rope.scaling.factor"))
        elif scaling == "none":
            self.rope_pos_scale = 1.0
        else:
            raise ValueError(f"{path}: rope scaling {scaling!r} not supported by the reference")

        self.tok_embd = self._matrix("token_embd.weight", None, self.n_embd)
        self.n_vocab = self.tok_embd.shape[0]
        self.output_norm = self._vector("output_norm.weight", self.n_embd)
        if "output.weight" in self._tensors:
            self.output = self._matrix("output.weight", self.n_vocab, self.n_embd)
        else:
            self.output = self.tok_embd  # tied classifier
        self.layers = [self._layer(i) for i in range(self.n_layer)]

    # ---- weights ----

    def tensor_type(self, name):
        return self._tensors[name].tensor_type

    def matrix_types(self):
        """Names of the storage types of the file's 2-D tensors, e.g. {"Q8_0"}."""
        return {t.tensor_type.name for t in self._tensors.values() if len(t.shape) == 2}

    def _array(self, name):
        """The tensor as float64, shaped as NumPy order (reversed GGUF dims)."""
        t = self._tensors[name]
        shape = tuple(int(d) for d in reversed(t.shape))
        if t.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
            values = np.asarray(t.data, dtype=np.float64)
        else:
            values = dequantize(t.data, t.tensor_type).astype(np.float64)
        return values.reshape(shape)

    def _matrix(self, name, n_out, n_in):
        """A weight W for y = W @ x: GGUF dims {n_in, n_out} -> array (n_out, n_in)."""
        w = self._array(name)
        if w.ndim != 2 or w.shape[1] != n_in or (n_out is not None and w.shape[0] != n_out):
            raise ValueError(f"{name}: shape {w.shape}, expected ({n_out}, {n_in})")
        return w

    def _vector(self, name, n):
        v = self._array(name)
        if v.shape != (n,):
            raise ValueError(f"{name}: shape {v.shape}, expected ({n},)")
        return v

    def _layer(self, i):
        p = f"blk.{i}."
        q_dim, kv_dim = self.n_head * self.head_dim, self.n_kv_head * self.head_dim
        L = {
            "attn_norm": self._vector(p + "attn_norm.weight", self.n_embd),
            "wq": self._matrix(p + "attn_q.weight", q_dim, self.n_embd),
            "wk": self._matrix(p + "attn_k.weight", kv_dim, self.n_embd),
            "wv": self._matrix(p + "attn_v.weight", kv_dim, self.n_embd),
            "wo": self._matrix(p + "attn_output.weight", self.n_embd, q_dim),
            "ffn_norm": self._vector(p + "ffn_norm.weight", self.n_embd),
            "w_gate": self._matrix(p + "ffn_gate.weight", self.n_ff, self.n_embd),
            "w_up": self._matrix(p + "ffn_up.weight", self.n_ff, self.n_embd),
            "w_down": self._matrix(p + "ffn_down.weight", self.n_embd, self.n_ff),
        }
        if self.arch == "qwen2":
            L["bq"] = self._vector(p + "attn_q.bias", q_dim)
            L["bk"] = self._vector(p + "attn_k.bias", kv_dim)
            L["bv"] = self._vector(p + "attn_v.bias", kv_dim)
        if self.arch == "gemma3":
            L["q_norm"] = self._vector(p + "attn_q_norm.weight", self.head_dim)
            L["k_norm"] = self._vector(p + "attn_k_norm.weight", self.head_dim)
            L["post_attn_norm"] = self._vector(p + "post_attention_norm.weight", self.n_embd)
            L["post_ffn_norm"] = self._vector(p + "post_ffw_norm.weight", self.n_embd)
        return L

    # ---- layer kinds ----

    def layer_is_local(self, i):
        """Gemma 3: sliding-window attention except on every sixth layer."""
        return self.sliding_window > 0 and i % GEMMA3_GLOBAL_EVERY != GEMMA3_GLOBAL_EVERY - 1

    # ---- forward ----

    def forward(self, token_ids):
        """Logits (float64 [T, n_vocab]) after each token of the prompt."""
        return self.hidden_states(token_ids) @ self.output.T

    def hidden_states(self, token_ids):
        """The final norm's output (float64 [T, n_embd]) at each token of the
        prompt: the vectors the output projection reads (and embeddings pool)."""
        ids = np.asarray(token_ids, dtype=np.int64)
        if ids.ndim != 1 or len(ids) == 0 or ids.min() < 0 or ids.max() >= self.n_vocab:
            raise ValueError("token ids must be a non-empty list inside the vocabulary")
        T = len(ids)
        pos = np.arange(T)
        x = self.tok_embd[ids].copy()  # [T, n_embd]
        if self.arch == "gemma3":
            x *= math.sqrt(self.n_embd)
        for i, L in enumerate(self.layers):
            x = x + self._attention(i, L, x, pos)
            x = x + self._ffn(L, x)
        return rms_norm(x, self.output_norm, self.eps)

    def _attention(self, i, L, x, pos):
        T, hd = x.shape[0], self.head_dim
        h = rms_norm(x, L["attn_norm"], self.eps)
        q, k, v = h @ L["wq"].T, h @ L["wk"].T, h @ L["wv"].T
        if "bq" in L:
            q, k, v = q + L["bq"], k + L["bk"], v + L["bv"]
        q = q.reshape(T, self.n_head, hd)
        k = k.reshape(T, self.n_kv_head, hd)
        v = v.reshape(T, self.n_kv_head, hd)
        if "q_norm" in L:
            q = rms_norm(q, L["q_norm"], self.eps)
            k = rms_norm(k, L["k_norm"], self.eps)

        local = self.arch == "gemma3" and self.layer_is_local(i)
        if local:
            base, pos_scale = self.gemma3_local_rope_base, 1.0  # linear scaling is for global layers
        else:
            base, pos_scale = self.rope_base, self.rope_pos_scale
        q = rope(q, pos * pos_scale, base, self.rope_dims, self.rope_neox)
        k = rope(k, pos * pos_scale, base, self.rope_dims, self.rope_neox)

        # Causal mask, narrowed to the window on local layers.
        delta = pos[:, None] - pos[None, :]  # [T_q, T_k] = q_pos - k_pos
        allowed = delta >= 0
        if local:
            allowed &= delta < self.sliding_window
        group = self.n_head // self.n_kv_head
        out = np.empty((T, self.n_head, hd))
        for hq in range(self.n_head):
            kv = hq // group
            scores = (q[:, hq, :] @ k[:, kv, :].T) / math.sqrt(hd)
            scores = np.where(allowed, scores, -np.inf)
            scores -= scores.max(axis=1, keepdims=True)
            p = np.exp(scores)
            p /= p.sum(axis=1, keepdims=True)
            out[:, hq, :] = p @ v[:, kv, :]
        o = out.reshape(T, self.n_head * hd) @ L["wo"].T
        if "post_attn_norm" in L:
            o = rms_norm(o, L["post_attn_norm"], self.eps)
        return o

    def _ffn(self, L, x):
        h = rms_norm(x, L["ffn_norm"], self.eps)
        gate, up = h @ L["w_gate"].T, h @ L["w_up"].T
        act = gelu_tanh(gate) if self.arch == "gemma3" else silu(gate)
        f = (act * up) @ L["w_down"].T
        if "post_ffn_norm" in L:
            f = rms_norm(f, L["post_ffn_norm"], self.eps)
        return f


# ---- the building blocks, each as its paper defines it ----

def rms_norm(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w over the last axis."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def rope(x, positions, base, rope_dims, neox):
    """Rotary embedding of x [T, heads, head_dim] at `positions` [T].

    Pair i (0 <= i < rope_dims/2) rotates by angle pos * base^(-2i/rope_dims).
    The "normal" (GPT-J / original llama GGUF) layout pairs elements
    (2i, 2i+1); the NeoX layout pairs (i, i + rope_dims/2). Dimensions past
    rope_dims pass through unchanged.
    """
    half = rope_dims // 2
    inv_freq = base ** (-2.0 * np.arange(half) / rope_dims)  # [half]
    angle = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]  # [T, half]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    out = x.copy()
    if neox:
        a, b = x[..., :half], x[..., half:rope_dims]
        out[..., :half] = a * cos - b * sin
        out[..., half:rope_dims] = a * sin + b * cos
    else:
        a, b = x[..., 0:rope_dims:2], x[..., 1:rope_dims:2]
        out[..., 0:rope_dims:2] = a * cos - b * sin
        out[..., 1:rope_dims:2] = a * sin + b * cos
    return out
