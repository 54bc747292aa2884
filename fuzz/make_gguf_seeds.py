#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_gguf: a few small valid GGUF files that
reach every value type, nested arrays, several tensor types, version 2 and a
non-default alignment. Written with `struct` alone, independently of the C++
writer. Run from the repository root: python3 fuzz/make_gguf_seeds.py"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_gguf")

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}
# GGUF type id -> (block size, bytes per block)
TENSOR_TYPES = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q8_0": (8, 32, 34),
                "Q4_K": (12, 256, 144), "Q6_K": (14, 256, 210), "BF16": (30, 1, 2)}


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        elem, items = v
        return struct.pack("<IQ", elem, len(items)) + b"".join(value(elem, x) for x in items)
    return struct.pack(SCALAR[t], v)


def gguf(kvs, tensors=(), version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, type name, dims)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, t, v in kvs:
        out += gstr(key) + struct.pack("<I", t) + value(t, v)
    datas, offset = [], 0
    for i, (name, tname, dims) in enumerate(tensors):
        tid, block, per_block = TENSOR_TYPES[tname]
        n = 1
        for d in dims:
            n *= d
        size = n // block * per_block
        out += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", tid, offset)
        datas.append(bytes((i * 37 + j) & 0xFF for j in range(size)))
        offset += -(-size // alignment) * alignment
    out += b"\0" * (-len(out) % alignment)
    for d in datas:
        out += d + b"\0" * (-len(d) % alignment)
    return out


SEEDS = {
    "empty.gguf": gguf([]),
    "all_types.gguf": gguf([
        ("general.architecture", STR, "llama"),
        ("u8", U8, 200), ("i8", I8, -100), ("u16", U16, 60000), ("i16", I16, -30000),
        ("u32", U32, 4000000000), ("i32", I32, -2000000000), ("f32", F32, 0.5), ("b", BOOL, 1),
        ("u64", U64, 2**64 - 1), ("i64", I64, -2**63), ("f64", F64, 1e300),
        ("strings", ARR, (STR, ["<s>", "</s>", "hello"])),
        ("nested", ARR, (ARR, [(U8, [1, 2]), (STR, ["x"]), (F32, [])])),
    ]),
    "tensors.gguf": gguf([("general.architecture", STR, "llama"), ("llama.block_count", U32, 1)], [
        ("token_embd.weight", "Q8_0", [32, 4]), ("output_norm.weight", "F32", [5]),
        ("blk.0.ffn_up.weight", "Q4_0", [32, 2, 1, 1]), ("half", "F16", [3]), ("bf", "BF16", [2, 2]),
    ]),
    "aligned64.gguf": gguf([("general.alignment", U32, 64), ("general.name", STR, "a64")],
                           [("blk.0.attn_q.weight", "Q4_K", [256, 2]), ("norm", "F32", [3])],
                           alignment=64),
    "version2.gguf": gguf([("tokenizer.ggml.tokens", ARR, (STR, ["a", "b", "c"])),
                           ("tokenizer.ggml.scores", ARR, (F32, [0.0, -1.0, -2.0])),
                           ("tokenizer.ggml.bos_token_id", U32, 1)],
                          [("q6", "Q6_K", [256])], version=2),
}

if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        assert len(data) < 4096, name
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")
