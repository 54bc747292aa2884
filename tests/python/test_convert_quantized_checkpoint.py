"""`tokenmill convert --from gptq|awq` end to end.

Small synthetic base models (llama with grouped-query attention, qwen2
with q/k/v biases; F32) are quantized here in NumPy, round to nearest per
group, and packed exactly as AutoGPTQ ("gptq" v1 and "gptq_v2") and AutoAWQ
(GEMM) write their checkpoints, into safetensors files written with plain
NumPy (the Hugging Face layout: llama's q/k rows in the rotary order
llama.cpp's converter undoes). The converted GGUF is read with the `gguf`
package and dequantized with its own decoders (gguf.quants), then compared
with the NumPy dequantization of the checkpoint:

- bit-exact where the GGUF type holds the codes: Q5_0 and Q8_0 for any
  zeros, Q4_0 for symmetric (zero 8) checkpoints, groups that are multiples
  of 32 and in order;
- within the stated bound where it cannot: Q4_1 (its offset -scale*zero is
  rounded to fp16) and act-order groups (blocks re-rounded by the reference
  quantizer: at most one Q5_0 step of the block), with the warning
  and its max error printed.

tokenmill runs the converted models, and llama.cpp (llama-cpp-python) loads
them and agrees with tokenmill's logits within test_quant.py's tolerance.
Bad checkpoints fail with a clear message and leave no file behind."""
import json
import os
import re
import shutil

import numpy as np
import pytest

from conftest import require_module, run_tokenmill

gguf = require_module("gguf", "gguf", "reads and dequantizes the converted files")

PROJ = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj"}
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # logical output column held by nibble k
N_HEAD, N_KV_HEAD = 4, 2


def synth(binary, path, arch):
    run_tokenmill(binary, "synth", "--arch", arch, "--n-embd", "256", "--n-ff", "512", "--n-layer", "2", "--n-head",
                  str(N_HEAD), "--n-kv-head", str(N_KV_HEAD), "--vocab", "512", "--type", "F32", "--seed", "5",
                  "-o", path, "-t", "2")


@pytest.fixture(scope="module")
def bases(tokenmill_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("convert_ckpt")
    out = {}
    for arch in ("llama", "qwen2"):
        out[arch] = str(d / f"{arch}.gguf")
        synth(tokenmill_bin, out[arch], arch)
    return d, out


def tensors(path):
    return {t.name: t for t in gguf.GGUFReader(path).tensors}


def matrix(t):
    """[rows, cols] float32 in GGUF row order, by the gguf package's decoders."""
    rows, cols = int(t.shape[1]), int(t.shape[0])
    return np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(rows, cols)


def rope_permute(w, n_head):
    """llama.cpp's LlamaModel.permute: HF rotary row order -> GGUF."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def rope_unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def quantize(w, group, sym, g_idx):
    """Round-to-nearest 4-bit per (group, output row), as GPTQ/AWQ store it:
    codes q [out, in], zeros [G, out] (1..15 asym, 8 sym), fp16 scales [G, out]."""
    out_dim, in_dim = w.shape
    groups = in_dim // group
    scales = np.zeros((groups, out_dim), np.float16)
    zeros = np.zeros((groups, out_dim), np.int64)
    for g in range(groups):
        cols = w[:, g_idx == g]
        if sym:
            s = np.maximum(np.abs(cols).max(axis=1) * 2 / 15, 1e-6)
            z = np.full(out_dim, 8)
        else:
            lo, hi = np.minimum(cols.min(axis=1), 0), np.maximum(cols.max(axis=1), 0)
            s = np.maximum((hi - lo) / 15, 1e-6)
            z = np.clip(np.round(-lo / s), 1, 15).astype(np.int64)
        scales[g], zeros[g] = s.astype(np.float16), z
    s32 = scales.astype(np.float32)[g_idx].T  # [out, in]
    q = np.clip(np.round(w / s32) + zeros[g_idx].T, 0, 15).astype(np.int64)
    return q, zeros, scales


def dequantize(q, zeros, scales, g_idx):
    return scales.astype(np.float32)[g_idx].T * (q - zeros[g_idx].T).astype(np.float32)


def pack_rows(v):
    """[n, 8*m] 4-bit values -> [n, m] int32, value k of each word at bits 4k."""
    v = v.astype(np.uint32).reshape(v.shape[0], -1, 8)
    return sum(v[:, :, k] << np.uint32(4 * k) for k in range(8)).astype(np.uint32).view(np.int32)


def pack_gptq(q, zeros, scales, g_idx, v1, with_g_idx):
    stored = (zeros - 1) & 15 if v1 else zeros
    out = {"qweight": pack_rows(q.T.reshape(-1, 8, q.shape[0]).transpose(0, 2, 1).reshape(-1, q.shape[0] * 8)
                                ).reshape(q.shape[1] // 8, q.shape[0]),
           "qzeros": pack_rows(stored), "scales": scales}
    if with_g_idx:
        out["g_idx"] = g_idx.astype(np.int32)
    return out


def pack_awq(q, zeros, scales, order=AWQ_ORDER):
    inter = np.concatenate([np.arange(c, c + 8)[order] for c in range(0, q.shape[0], 8)])
    return {"qweight": pack_rows(q.T[:, inter]), "qzeros": pack_rows(zeros[:, inter]), "scales": scales}


def write_safetensors(path, named):
    header, blobs, offset = {}, [], 0
    dtypes = {np.dtype(np.int32): "I32", np.dtype(np.float16): "F16"}
    for name, a in named.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dtypes[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def make_checkpoint(d, base, arch, method, group, sym=False, v1=True, desc_act=False, shards=1, seed=0):
    """Writes the checkpoint folder; returns {gguf name: expected [rows, cols]}
    and {gguf bias name: expected bias}."""
    rng = np.random.default_rng(seed)
    base_t = tensors(base)
    named, expected, biases = {}, {}, {}
    n_layer = 1 + max(int(n.split(".")[1]) for n in base_t if n.startswith("blk."))
    for layer in range(n_layer):
        for role, hf in PROJ.items():
            name = f"blk.{layer}.{role}.weight"
            w = matrix(base_t[name])
            heads = {"attn_q": N_HEAD, "attn_k": N_KV_HEAD}.get(role) if arch == "llama" else None
            if heads:
                w = rope_unpermute(w, heads)
            g = w.shape[1] if group == -1 else group
            g_idx = np.arange(w.shape[1]) // g
            if desc_act:
                g_idx = g_idx[rng.permutation(w.shape[1])]
            q, zeros, scales = quantize(w, g, sym, g_idx)
            ref = dequantize(q, zeros, scales, g_idx)
            expected[name] = rope_permute(ref, heads) if heads else ref
            packed = (pack_awq(q, zeros, scales) if method == "awq"
                      else pack_gptq(q, zeros, scales, g_idx, v1, with_g_idx=desc_act or layer == 0))
            prefix = f"model.layers.{layer}.{hf}"
            named.update({f"{prefix}.{k}": v for k, v in packed.items()})
            bias = base_t.get(f"blk.{layer}.{role}.bias")
            if bias is not None:
                b = (np.asarray(bias.data, np.float32).reshape(-1) + 0.25).astype(np.float16)
                named[f"{prefix}.bias"] = rope_unpermute(b, heads) if heads else b
                biases[f"blk.{layer}.{role}.bias"] = b.astype(np.float32)
    os.makedirs(d, exist_ok=True)
    names = sorted(named)
    for i in range(shards):
        part = {n: named[n] for n in names[i::shards]}
        write_safetensors(os.path.join(d, f"model-{i + 1:05d}-of-{shards:05d}.safetensors"), part)
    qc = {"quant_method": method, "bits": 4, "group_size": group}
    if method == "gptq":
        qc.update({"desc_act": desc_act, "sym": sym, "checkpoint_format": "gptq" if v1 else "gptq_v2"})
        with open(os.path.join(d, "quantize_config.json"), "w") as f:
            json.dump(qc, f)
    else:
        qc.update({"version": "gemm", "zero_point": True})
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({"architectures": ["X"], "quantization_config": qc}, f)
    return expected, biases


def convert(binary, method, ckpt, base, out, *extra):
    proc = run_tokenmill(binary, "convert", "--from", method, ckpt, "--base", base, "-o", out, "-t", "2", *extra)
    return proc.stderr


def reported_error(stderr):
    m = re.search(r"max abs error ([0-9.e+-]+)\)", stderr)
    assert m, stderr
    return float(m.group(1))


# (name, arch, method, group, sym, v1, desc_act, shards, --type, expected type, exact)
CASES = [
    ("gptq_asym_g32_sharded", "llama", "gptq", 32, False, True, False, 2, None, "Q5_0", True),
    ("gptq_sym_g128", "llama", "gptq", 128, True, True, False, 1, None, "Q4_0", True),
    ("gptq_asym_g128_q8", "llama", "gptq", 128, False, True, False, 1, "Q8_0", "Q8_0", True),
    ("gptq_asym_g32_q4_1", "llama", "gptq", 32, False, True, False, 1, "Q4_1", "Q4_1", False),
    ("gptq_desc_act_g32", "llama", "gptq", 32, False, True, True, 1, None, "Q5_0", False),
    ("gptq_v2_sym_whole_row", "qwen2", "gptq", -1, True, False, False, 1, None, "Q4_0", True),
    ("awq_g64", "qwen2", "awq", 64, False, False, False, 1, None, "Q5_0", True),
    ("awq_g32_llama", "llama", "awq", 32, False, False, False, 1, None, "Q5_0", True),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_converted_weights_match_checkpoint(tokenmill_bin, bases, case):
    name, arch, method, group, sym, v1, desc_act, shards, qtype, want_type, exact = case
    d, base = bases
    ckpt, out = str(d / name), str(d / f"{name}.gguf")
    expected, biases = make_checkpoint(ckpt, base[arch], arch, method, group, sym, v1, desc_act, shards)
    stderr = convert(tokenmill_bin, method, ckpt, base[arch], out, *(["--type", qtype] if qtype else []))
    if qtype is None:
        assert f"--type auto chose {want_type}" in stderr, stderr
    reader = gguf.GGUFReader(out)
    assert int(reader.fields["general.file_type"].parts[-1][0]) == {"Q4_0": 2, "Q4_1": 3, "Q5_0": 8, "Q8_0": 7}[want_type]
    src = bytes(reader.fields["tokenmill.convert.source"].parts[-1]).decode()
    assert src == method
    assert int(reader.fields["tokenmill.convert.group_size"].parts[-1][0]) == group
    got, base_t = tensors(out), tensors(base[arch])
    assert set(got) == set(base_t)
    worst, amax_all = 0.0, 0.0
    for tname, want in expected.items():
        amax_all = max(amax_all, float(np.abs(want).max()))
        t = got[tname]
        assert t.tensor_type.name == want_type, tname
        diff = np.abs(matrix(t) - want)
        # And the checkpoint is the base model's weights, 4-bit rounded (a
        # row order undone the wrong way would be far off).
        b = matrix(base_t[tname])
        assert np.sqrt(np.mean((matrix(t) - b) ** 2) / np.mean(b ** 2)) < 0.15, tname
        worst = max(worst, float(diff.max()))
        if exact:
            assert np.array_equal(matrix(t), want), f"{tname}: max diff {diff.max()}"
        elif desc_act:
            # Re-rounded per 32-block by the reference Q5_0 quantizer (step
            # d = amax / 16, the largest element at code 0): half a step, or
            # up to one step for an element of the other sign clamped at
            # 15 d; plus the fp16 rounding of d.
            amax = np.abs(want).reshape(want.shape[0], -1, 32).max(axis=2, keepdims=True)
            assert (diff.reshape(amax.shape[0], -1, 32) <= 1.01 * amax / 16 + 1e-7).all(), tname
    for tname, want in biases.items():
        assert got[tname].tensor_type.name == "F32"
        assert np.array_equal(np.asarray(got[tname].data, np.float32).reshape(-1), want), tname
    for tname, t in base_t.items():  # everything else is the base's, byte for byte
        if tname not in expected and tname not in biases:
            assert np.array_equal(np.asarray(got[tname].data), np.asarray(t.data)), tname
    if exact:
        assert "warning" not in stderr, stderr
        assert reported_error(stderr) == 0.0
    else:
        assert "warning:" in stderr and ("re-rounded" in stderr if desc_act else "Q4_1 is the nearest" in stderr)
        assert worst > 0 and worst <= reported_error(stderr) * (1 + 5e-3), (worst, stderr)  # printed to 3 digits
        if not desc_act:  # Q4_1: the fp16 rounding of scale * zero, which is about -min <= max |w|
            assert worst <= 1.1 * amax_all * 2.0 ** -11, worst
    # tokenmill runs it.
    npy = str(d / f"{name}.npy")
    run_tokenmill(tokenmill_bin, "logits", "-m", out, "--prompt-ids", "1,5,9,22", "-o", npy, "-t", "2")
    assert np.isfinite(np.load(npy)).all()


@pytest.mark.parametrize("arch,method", [("llama", "gptq"), ("qwen2", "awq")])
def test_llama_cpp_loads_converted_and_agrees(tokenmill_bin, bases, arch, method):
    llama_cpp = require_module("llama_cpp", "llama-cpp-python", "loads the converted files")
    d, base = bases
    ckpt, out = str(d / f"lc_{arch}"), str(d / f"lc_{arch}.gguf")
    make_checkpoint(ckpt, base[arch], arch, method, 32, seed=1)
    convert(tokenmill_bin, method, ckpt, base[arch], out)
    ids = [1, 5, 9, 22, 7, 100]
    m = llama_cpp.Llama(model_path=out, n_ctx=64, logits_all=True, verbose=False, n_threads=2)
    m.eval(ids)
    theirs = np.array(m.scores[: len(ids)], dtype=np.float64)
    ours_npy, f32_npy = str(d / f"lc_{arch}.npy"), str(d / f"lc_{arch}_f32.npy")
    run_tokenmill(tokenmill_bin, "logits", "-m", out, "--prompt-ids", ",".join(map(str, ids)), "-o", ours_npy,
                  "-t", "2")
    run_tokenmill(tokenmill_bin, "logits", "-m", base[arch], "--prompt-ids", ",".join(map(str, ids)), "-o", f32_npy,
                  "-t", "2")
    ours, f32 = np.load(ours_npy).astype(np.float64), np.load(f32_npy).astype(np.float64)
    rms = lambda a: float(np.sqrt(np.mean(a ** 2)))
    # test_quant.py's tolerance: the two readers (llama.cpp rounds activations
    # to 8 bits) agree far more closely than either does with the F32 base.
    assert rms(ours - theirs) < 0.05, rms(ours - theirs)
    assert rms(ours - theirs) < 0.25 * rms(ours - f32), (rms(ours - theirs), rms(ours - f32))


def expect_failure(binary, args, message, out):
    proc = run_tokenmill(binary, *args, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr
    assert not os.path.exists(out) and not os.path.exists(out + ".tmp")


def edit_json(path, **changes):
    with open(path) as f:
        j = json.load(f)
    j.update(changes)
    with open(path, "w") as f:
        json.dump(j, f)


def test_bad_checkpoints_fail_cleanly(tokenmill_bin, bases):
    d, base = bases
    good = str(d / "refuse_good")
    make_checkpoint(good, base["llama"], "llama", "gptq", 32)
    out = str(d / "refused.gguf")
    args = lambda ckpt, method="gptq": ["convert", "--from", method, ckpt, "--base", base["llama"], "-o", out]

    def variant(tag):
        path = str(d / f"refuse_{tag}")
        shutil.copytree(good, path)
        return path, os.path.join(path, "model-00001-of-00001.safetensors"), os.path.join(path, "quantize_config.json")

    ckpt, st, qc = variant("bits8")
    edit_json(qc, bits=8)
    expect_failure(tokenmill_bin, args(ckpt), "bits = 8: only 4-bit checkpoints can be imported", out)
    ckpt, st, qc = variant("group48")
    edit_json(qc, group_size=48)
    expect_failure(tokenmill_bin, args(ckpt), "unsupported group size 48: it does not divide the input dimension 256",
                   out)
    ckpt, st, qc = variant("marlin")
    edit_json(qc, checkpoint_format="marlin")
    expect_failure(tokenmill_bin, args(ckpt), "unknown checkpoint format 'marlin'", out)
    expect_failure(tokenmill_bin, args(good, "awq"), "use --from gptq", out)
    ckpt, st, qc = variant("header")
    with open(st, "r+b") as f:
        f.write((1 << 40).to_bytes(8, "little"))
    expect_failure(tokenmill_bin, args(ckpt), "bad header length", out)
    ckpt, st, qc = variant("json")
    with open(st, "r+b") as f:
        f.seek(8)
        f.write(b"[")
    expect_failure(tokenmill_bin, args(ckpt), "the header is not valid JSON", out)
    # A checkpoint of another shape (n_ff 384 instead of 512) does not fit the base.
    other = str(d / "other_base.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "llama", "--n-embd", "256", "--n-ff", "384", "--n-layer", "2",
                  "--n-head", str(N_HEAD), "--n-kv-head", str(N_KV_HEAD), "--vocab", "512", "--type", "F32", "-o",
                  other, "-t", "2")
    ckpt = str(d / "refuse_shape")
    make_checkpoint(ckpt, other, "llama", "gptq", 32)
    expect_failure(tokenmill_bin, args(ckpt), "model.layers.0.mlp.down_proj.qweight: shape [48, 256] does not match "
                   "the base model: expected [64, 256]", out)
    # A layer missing from the checkpoint.
    ckpt, st, qc = variant("missing")
    with open(st, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    for k in [k for k in header if k.startswith("model.layers.1.mlp.up_proj.")]:
        del header[k]
    text = json.dumps(header).encode()
    with open(st, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + raw[8 + n:])
    expect_failure(tokenmill_bin, args(ckpt), "missing tensor: the checkpoint has no 4-bit layer for base tensor "
                   "blk.1.ffn_up.weight", out)
    os.remove(os.path.join(ckpt, "quantize_config.json"))
    expect_failure(tokenmill_bin, args(ckpt), "no quantization settings found", out)
