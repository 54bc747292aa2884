"""An independent NumPy reference of the decoder forward pass of the
architectures tokenmill runs (SUPPORTED_ARCHS), for tests.

Written from the architectures' published definitions (the Llama, Qwen2,
Phi-3, Gemma 2, Gemma 3, Qwen3, OLMo 2 and Granite 3 papers / model cards;
for the mixture-of-experts models Mixtral, Qwen1.5-MoE / Qwen2-MoE,
Qwen3-MoE and OLMoE
and Hugging Face configurations, and the GGUF tensor naming
and layout conventions), not from tokenmill's C++: weights are read with the PyPI `gguf`
package (its GGUFReader, faster to open: fast_gguf_reader.py) and quantized tensors are dequantized with
`gguf.quants.dequantize`, so nothing here shares code with tokenmill.

Everything is computed in float64 over the whole prompt at once (no KV
cache, no chunking): the causal mask and the sliding window are explicit
masks over a [T, T] score matrix.

Usage:
    model = ReferenceModel("model.gguf")
    logits = model.forward([1, 2, 3])   # float64 [num_tokens, n_vocab]
    # With a LoRA adapter file merged into the weights (reference_lora.py):
    tuned = ReferenceModel("model.gguf", lora="adapter.gguf", lora_scale=1.0)
"""
import math

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import dequantize

from fast_gguf_reader import FastGGUFReader

from reference_lora import LoraDeltas, merge

# Gemma 3 interleaves five sliding-window ("local") layers with one global
# layer, and its local layers use a fixed RoPE base of 10 000 (the global
# layers use the file's rope.freq_base). Neither is stored in GGUF files.
GEMMA3_GLOBAL_EVERY = 6
GEMMA3_LOCAL_ROPE_BASE = 10000.0
# Gemma 2 alternates: even layers (0, 2, ...) use the sliding window, odd
# layers are global, all with the file's RoPE base. A file that leaves the
# window or the soft-capping values out gets the released models' values.
GEMMA2_DEFAULT_WINDOW = 4096
GEMMA2_DEFAULT_ATTN_SOFTCAP = 50.0
GEMMA2_DEFAULT_FINAL_SOFTCAP = 30.0
GEMMA2_27B_LAYERS = 46

SUPPORTED_ARCHS = ("llama", "qwen2", "gemma3", "phi3", "gemma2", "qwen3", "olmo2", "granite", "qwen2moe", "qwen3moe",
                   "olmoe")
# Mixture of experts: softmax over all experts, the top k, their
# probabilities renormalised to sum to one (Mixtral, Qwen3-MoE) or used as
# they are (Qwen2-MoE's and OLMoE's norm_topk_prob = false).
MOE_NORMALISED = ("llama", "qwen3moe")


def tensor_values(t):
    """A GGUFReader tensor as float64, shaped as NumPy order (reversed GGUF dims)."""
    shape = tuple(int(d) for d in reversed(t.shape))
    if t.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
        values = np.asarray(t.data, dtype=np.float64)
    else:
        values = dequantize(t.data, t.tensor_type).astype(np.float64)
    return values.reshape(shape)


def _field_value(reader, key):
    """Scalar or string value of a metadata key, or None when absent."""
    field = reader.get_field(key)
    if field is None:
        return None
    return field.contents()


class ReferenceModel:
    def __init__(self, path, lora=None, lora_scale=1.0):
        """`lora`: an adapter file (or its LoraDeltas) whose deltas are
        merged into the weights they adapt (W + scale * B @ A) as they are
        read; `lora_scale` is the user scale of a file."""
        self.path = path
        reader = FastGGUFReader(path)
        self._tensors = {t.name: t for t in reader.tensors}
        arch = _field_value(reader, "general.architecture")
        if arch not in SUPPORTED_ARCHS:
            raise ValueError(f"{path}: unsupported architecture {arch!r}")
        self.arch = arch
        self.lora = lora
        if lora is not None and not isinstance(lora, LoraDeltas):
            self.lora = LoraDeltas(str(lora), tensor_values, lora_scale)
        if self.lora is not None:
            if self.lora.arch != arch:
                raise ValueError(f"{self.lora.path}: adapter for {self.lora.arch!r}, model is {arch!r}")
            unknown = [n for n in self.lora.names() if n not in self._tensors]
            if unknown:
                raise ValueError(f"{self.lora.path}: adapts tensors the model lacks: {unknown}")

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
        # phi3 files may store a window too, but llama.cpp does not apply it
        # (nor does tokenmill): it is ignored here.
        if arch == "gemma3":
            self.sliding_window = int(get("attention.sliding_window", 0))
        elif arch == "gemma2":
            self.sliding_window = int(get("attention.sliding_window", GEMMA2_DEFAULT_WINDOW))
        else:
            self.sliding_window = 0
        # Architecture traits; tests flip them to show the comparison notices.
        self.rope_neox = arch in ("qwen2", "gemma3", "phi3", "gemma2", "qwen3", "olmo2", "qwen2moe", "qwen3moe",
                                  "olmoe")
        # OLMo 2 normalises after each block instead of before, and its q/k
        # norms span the whole projection (all heads) rather than one head
        # (OLMoE too, with llama's pre-norms).
        self.pre_norm = arch != "olmo2"
        self.qk_norm_full_width = arch in ("olmo2", "olmoe")
        # Mixture of experts (0: a dense FFN).
        self.n_expert = int(get("expert_count", 0))
        self.n_expert_used = int(get("expert_used_count", 0)) if self.n_expert else 0
        self.n_ff_exp = int(get("expert_feed_forward_length", self.n_ff)) if self.n_expert else 0
        self.moe_normalised = arch in MOE_NORMALISED
        gemma = arch in ("gemma3", "gemma2")
        self.ffn_gelu = gemma
        self.embd_scale = math.sqrt(self.n_embd) if gemma else 1.0
        # Soft-capping (0: none): cap * tanh(x / cap) of the scaled attention
        # scores and of the final logits.
        self.attn_softcap, self.final_softcap = 0.0, 0.0
        if arch == "gemma2":
            self.attn_softcap = float(get("attn_logit_softcapping", GEMMA2_DEFAULT_ATTN_SOFTCAP))
            self.final_softcap = float(get("final_logit_softcapping", GEMMA2_DEFAULT_FINAL_SOFTCAP))
        # Gemma 2 27B (46 layers) scales queries by 1/sqrt(n_embd / n_head).
        if arch == "gemma2" and self.n_layer == GEMMA2_27B_LAYERS:
            self.attn_scale = 1.0 / math.sqrt(self.n_embd // self.n_head)
        else:
            self.attn_scale = 1.0 / math.sqrt(self.head_dim)
        # Granite's multipliers (a value of 0 or none means "not applied"):
        # embeddings times embedding_scale, each block's output times
        # residual_scale, q.k times attention.scale, logits / logit_scale.
        self.residual_scale, self.logit_scale = 1.0, 1.0
        if arch == "granite":
            self.logit_scale = float(get("logit_scale"))
            self.embd_scale = float(get("embedding_scale", 0.0)) or 1.0
            self.residual_scale = float(get("residual_scale", 0.0)) or 1.0
            self.attn_scale = float(get("attention.scale", 0.0)) or self.attn_scale
        self.gemma3_local_rope_base = GEMMA3_LOCAL_ROPE_BASE
        self.rope_scaling = self._rope_scaling(get)

        self.tok_embd = self._matrix("token_embd.weight", None, self.n_embd)
        self.n_vocab = self.tok_embd.shape[0]
        self.output_norm = self._vector("output_norm.weight", self.n_embd)
        if "output.weight" in self._tensors:
            self.output = self._matrix("output.weight", self.n_vocab, self.n_embd)
        else:
            self.output = self.tok_embd  # tied classifier
        self.layers = [self._layer(i) for i in range(self.n_layer)]

    def _rope_scaling(self, get):
        """The file's RoPE scaling: rope.scaling.* keys, and Llama 3.1's
        rope_freqs tensor (divisors of each pair's frequency)."""
        kind = get("rope.scaling.type", "none")
        if kind not in ("none", "linear", "yarn", "llama3"):
            raise ValueError(f"{self.path}: rope scaling {kind!r} not supported by the reference")
        s = RopeScaling(attn_factor=float(get("rope.scaling.attn_factor", 1.0)))
        if kind in ("linear", "yarn"):
            s.factor = float(get("rope.scaling.factor"))
        if kind == "yarn":
            s.yarn = True
            s.orig_ctx = int(get("rope.scaling.original_context_length", get("context_length", 2048)))
            s.beta_fast = float(get("rope.scaling.yarn_beta_fast", 32.0))
            s.beta_slow = float(get("rope.scaling.yarn_beta_slow", 1.0))
        if "rope_freqs.weight" in self._tensors:
            s.freq_factors = self._vector("rope_freqs.weight", self.rope_dims // 2)
        if "rope_factors_long.weight" in self._tensors:
            # Phi-3 LongRoPE (microsoft/Phi-3-mini-128k-instruct's
            # rope_scaling): the long factors when the model runs with a
            # context past the original one, else the short ones.
            ctx = int(get("context_length", 2048))
            orig = int(get("rope.scaling.original_context_length", ctx))
            which = "long" if ctx > orig else "short"
            s.freq_factors = self._vector(f"rope_factors_{which}.weight", self.rope_dims // 2)
        return s

    # ---- weights ----

    def tensor_type(self, name):
        return self._tensors[name].tensor_type

    def matrix_types(self):
        """Names of the storage types of the file's 2-D tensors, e.g. {"Q8_0"}."""
        return {t.tensor_type.name for t in self._tensors.values() if len(t.shape) == 2}

    def _array(self, name):
        """The tensor as float64 in NumPy order, the adapter's delta merged."""
        return merge(tensor_values(self._tensors[name]), self.lora, name)

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
        L = {"wo": self._matrix(p + "attn_output.weight", self.n_embd, q_dim)}
        if self.n_expert:
            L.update(self._experts(p))
        else:
            L["w_down"] = self._matrix(p + "ffn_down.weight", self.n_embd, self.n_ff)
        if self.pre_norm:
            L["attn_norm"] = self._vector(p + "attn_norm.weight", self.n_embd)
            L["ffn_norm"] = self._vector(p + "ffn_norm.weight", self.n_embd)
        if p + "attn_qkv.weight" in self._tensors:
            # Fused (phi3): q rows, then k rows, then v rows.
            qkv = self._matrix(p + "attn_qkv.weight", q_dim + 2 * kv_dim, self.n_embd)
            L["wq"], L["wk"], L["wv"] = qkv[:q_dim], qkv[q_dim:q_dim + kv_dim], qkv[q_dim + kv_dim:]
        else:
            L["wq"] = self._matrix(p + "attn_q.weight", q_dim, self.n_embd)
            L["wk"] = self._matrix(p + "attn_k.weight", kv_dim, self.n_embd)
            L["wv"] = self._matrix(p + "attn_v.weight", kv_dim, self.n_embd)
        if self.n_expert:
            pass
        elif p + "ffn_gate.weight" in self._tensors:
            L["w_gate"] = self._matrix(p + "ffn_gate.weight", self.n_ff, self.n_embd)
            L["w_up"] = self._matrix(p + "ffn_up.weight", self.n_ff, self.n_embd)
        else:
            # Fused (phi3's gate_up_proj): the gate rows, then the up rows.
            gate_up = self._matrix(p + "ffn_up.weight", 2 * self.n_ff, self.n_embd)
            L["w_gate"], L["w_up"] = gate_up[:self.n_ff], gate_up[self.n_ff:]
        if self.arch == "qwen2" or (self.n_expert and p + "attn_q.bias" in self._tensors):
            L["bq"] = self._vector(p + "attn_q.bias", q_dim)
            L["bk"] = self._vector(p + "attn_k.bias", kv_dim)
            L["bv"] = self._vector(p + "attn_v.bias", kv_dim)
        if self.arch in ("gemma3", "qwen3", "qwen3moe"):
            L["q_norm"] = self._vector(p + "attn_q_norm.weight", self.head_dim)
            L["k_norm"] = self._vector(p + "attn_k_norm.weight", self.head_dim)
        if self.qk_norm_full_width:
            L["q_norm"] = self._vector(p + "attn_q_norm.weight", q_dim)
            L["k_norm"] = self._vector(p + "attn_k_norm.weight", kv_dim)
        if self.arch in ("gemma3", "gemma2", "olmo2"):
            L["post_attn_norm"] = self._vector(p + "post_attention_norm.weight", self.n_embd)
            L["post_ffn_norm"] = self._vector(p + "post_ffw_norm.weight", self.n_embd)
        return L

    def _experts(self, p):
        """The router [n_expert, n_embd], the experts stacked as arrays
        [n_expert, rows, cols] (GGUF dims {cols, rows, n_expert}) and, when
        present, the shared expert with its gate vector."""
        E, F = self.n_expert, self.n_ff_exp
        L = {"router": self._matrix(p + "ffn_gate_inp.weight", E, self.n_embd)}
        for key, name, shape in (("gate_exps", "ffn_gate_exps", (E, F, self.n_embd)),
                                 ("up_exps", "ffn_up_exps", (E, F, self.n_embd)),
                                 ("down_exps", "ffn_down_exps", (E, self.n_embd, F))):
            w = self._array(p + name + ".weight")
            if w.shape != shape:
                raise ValueError(f"{name}: shape {w.shape}, expected {shape}")
            L[key] = w
        if p + "ffn_gate_inp_shexp.weight" in self._tensors:
            L["shexp_gate"] = self._vector(p + "ffn_gate_inp_shexp.weight", self.n_embd)
            shared = self._array(p + "ffn_gate_shexp.weight")
            L["gate_shexp"] = shared
            L["up_shexp"] = self._matrix(p + "ffn_up_shexp.weight", shared.shape[0], self.n_embd)
            L["down_shexp"] = self._matrix(p + "ffn_down_shexp.weight", self.n_embd, shared.shape[0])
        return L

    # ---- layer kinds ----

    def layer_is_local(self, i):
        """Gemma 3: sliding-window attention except on every sixth layer;
        Gemma 2: on the even layers."""
        if self.sliding_window <= 0:
            return False
        if self.arch == "gemma2":
            return i % 2 == 0
        return i % GEMMA3_GLOBAL_EVERY != GEMMA3_GLOBAL_EVERY - 1

    # ---- forward ----

    def forward(self, token_ids):
        """Logits (float64 [T, n_vocab]) after each token of the prompt."""
        logits = self.hidden_states(token_ids) @ self.output.T / self.logit_scale
        if self.final_softcap > 0:
            logits = softcap(logits, self.final_softcap)
        return logits

    def hidden_states(self, token_ids):
        """The final norm's output (float64 [T, n_embd]) at each token of the
        prompt: the vectors the output projection reads (and embeddings pool)."""
        ids = np.asarray(token_ids, dtype=np.int64)
        if ids.ndim != 1 or len(ids) == 0 or ids.min() < 0 or ids.max() >= self.n_vocab:
            raise ValueError("token ids must be a non-empty list inside the vocabulary")
        T = len(ids)
        pos = np.arange(T)
        self.router_gaps = []  # per MoE layer: [T] (see _moe)
        x = self.tok_embd[ids].copy()  # [T, n_embd]
        x *= self.embd_scale
        for i, L in enumerate(self.layers):
            x = x + self.residual_scale * self._attention(i, L, x, pos)
            x = x + self.residual_scale * self._ffn(L, x)
        return rms_norm(x, self.output_norm, self.eps)

    def _attention(self, i, L, x, pos):
        T, hd = x.shape[0], self.head_dim
        h = rms_norm(x, L["attn_norm"], self.eps) if "attn_norm" in L else x
        q, k, v = h @ L["wq"].T, h @ L["wk"].T, h @ L["wv"].T
        if "bq" in L:
            q, k, v = q + L["bq"], k + L["bk"], v + L["bv"]
        full_width = "q_norm" in L and self.qk_norm_full_width
        if full_width:  # one mean over all heads, before the split
            q = rms_norm(q, L["q_norm"], self.eps)
            k = rms_norm(k, L["k_norm"], self.eps)
        q = q.reshape(T, self.n_head, hd)
        k = k.reshape(T, self.n_kv_head, hd)
        v = v.reshape(T, self.n_kv_head, hd)
        if "q_norm" in L and not full_width:  # each head on its own ([head_dim] or per-head slices)
            q = rms_norm(q, L["q_norm"].reshape(-1, hd), self.eps)
            k = rms_norm(k, L["k_norm"].reshape(-1, hd), self.eps)

        local = self.layer_is_local(i)
        if local and self.arch == "gemma3":
            # Scaling stretches the global layers only (their attn_factor stays).
            base = self.gemma3_local_rope_base
            scaling = RopeScaling(attn_factor=self.rope_scaling.attn_factor)
        else:
            base, scaling = self.rope_base, self.rope_scaling
        q = rope(q, pos, base, self.rope_dims, self.rope_neox, scaling)
        k = rope(k, pos, base, self.rope_dims, self.rope_neox, scaling)

        # Causal mask, narrowed to the window on local layers.
        delta = pos[:, None] - pos[None, :]  # [T_q, T_k] = q_pos - k_pos
        allowed = delta >= 0
        if local:
            allowed &= delta < self.sliding_window
        group = self.n_head // self.n_kv_head
        out = np.empty((T, self.n_head, hd))
        for hq in range(self.n_head):
            kv = hq // group
            scores = (q[:, hq, :] @ k[:, kv, :].T) * self.attn_scale
            if self.attn_softcap > 0:
                scores = softcap(scores, self.attn_softcap)
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
        h = rms_norm(x, L["ffn_norm"], self.eps) if "ffn_norm" in L else x
        if "router" in L:
            return self._moe(L, h)
        gate, up = h @ L["w_gate"].T, h @ L["w_up"].T
        act = gelu_tanh(gate) if self.ffn_gelu else silu(gate)
        f = (act * up) @ L["w_down"].T
        if "post_ffn_norm" in L:
            f = rms_norm(f, L["post_ffn_norm"], self.eps)
        return f


    def _moe(self, L, h):
        """Each token through its n_expert_used most probable experts
        (softmax over the router's logits), their outputs weighted by the
        probabilities; plus the sigmoid-gated shared expert."""
        logits = h @ L["router"].T  # [T, n_expert]
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        # How close each token's choice was: the router logit of its last
        # chosen expert minus that of the best one left out (inf: all chosen).
        ranked = -np.sort(-logits, axis=1)
        k = self.n_expert_used
        gap = ranked[:, k - 1] - ranked[:, k] if k < self.n_expert else np.full(h.shape[0], np.inf)
        self.router_gaps.append(gap)
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            top = np.argsort(-probs[t], kind="stable")[: self.n_expert_used]
            weights = probs[t, top]
            if self.moe_normalised:
                weights = weights / weights.sum()
            for e, w in zip(top, weights):
                gate, up = L["gate_exps"][e] @ h[t], L["up_exps"][e] @ h[t]
                out[t] += w * (L["down_exps"][e] @ (silu(gate) * up))
        if "shexp_gate" in L:
            gate = 1.0 / (1.0 + np.exp(-(h @ L["shexp_gate"])))  # [T]
            shared = (silu(h @ L["gate_shexp"].T) * (h @ L["up_shexp"].T)) @ L["down_shexp"].T
            out += gate[:, None] * shared
        return out


# ---- the building blocks, each as its paper defines it ----

def rms_norm(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w over the last axis."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def softcap(x, cap):
    """cap * tanh(x / cap): x squashed smoothly into (-cap, cap)."""
    return cap * np.tanh(x / cap)


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


class RopeScaling:
    """How positions are stretched past the trained context.

    factor: linear position interpolation, angle / factor (linear and YaRN).
    freq_factors: Llama 3.1's per-pair divisors of the frequency (or None).
    yarn: YaRN (Peng et al. 2023, "YaRN: Efficient Context Window Extension"),
    in the form llama.cpp's ggml implements it -- pairs that turn more than
    beta_fast times within the original context keep their angle, pairs
    that turn fewer than beta_slow times are interpolated, a linear ramp over
    the (floor/ceil-rounded) pair index between; cos and sin are multiplied
    by the attention temperature 1 + 0.1 ln(factor).
    attn_factor: multiplies cos and sin in every case (rope.scaling.attn_factor).
    """

    def __init__(self, factor=1.0, attn_factor=1.0):
        self.factor = factor
        self.attn_factor = attn_factor
        self.freq_factors = None
        self.yarn = False
        self.orig_ctx = 0
        self.beta_fast = 32.0
        self.beta_slow = 1.0

    def angles(self, positions, base, rope_dims):
        """Angles [T, rope_dims/2] at `positions` and the cos/sin magnitude."""
        half = rope_dims // 2
        i = np.arange(half, dtype=np.float64)
        theta = base ** (-2.0 * i / rope_dims)  # [half]
        if self.freq_factors is not None:
            theta = theta / self.freq_factors
        extrapolated = np.asarray(positions, dtype=np.float64)[:, None] * theta[None, :]
        interpolated = extrapolated / self.factor
        if not self.yarn:
            return interpolated, self.attn_factor

        # The pair index at which a frequency makes `turns` turns over orig_ctx.
        def pair_at(turns):
            return rope_dims * math.log(self.orig_ctx / (turns * 2 * math.pi)) / (2 * math.log(base))
        low = max(0.0, math.floor(pair_at(self.beta_fast)))
        high = min(rope_dims - 1.0, math.ceil(pair_at(self.beta_slow)))
        keep = 1.0 - np.clip((i - low) / max(0.001, high - low), 0.0, 1.0)  # 1: extrapolate
        angle = interpolated * (1.0 - keep) + extrapolated * keep
        return angle, self.attn_factor * (1.0 + 0.1 * math.log(self.factor))


def rope(x, positions, base, rope_dims, neox, scaling=None):
    """Rotary embedding of x [T, heads, head_dim] at `positions` [T].

    Pair i (0 <= i < rope_dims/2) rotates by angle pos * base^(-2i/rope_dims)
    (stretched as `scaling`, a RopeScaling, says). The "normal" (GPT-J /
    original llama GGUF) layout pairs elements (2i, 2i+1); the NeoX layout
    pairs (i, i + rope_dims/2). Dimensions past rope_dims pass through
    unchanged.
    """
    half = rope_dims // 2
    angle, magnitude = (scaling or RopeScaling()).angles(positions, base, rope_dims)  # [T, half]
    cos, sin = magnitude * np.cos(angle)[:, None, :], magnitude * np.sin(angle)[:, None, :]
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
