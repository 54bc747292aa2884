#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_safetensors: small valid safetensors files
in the shapes a GPTQ or AWQ checkpoint holds (int32 packed words, fp16
scales, a g_idx), one with __metadata__ and an empty tensor, and one with
a header padded with spaces as some writers do. Run from the repository
root: python3 fuzz/make_safetensors_seeds.py"""
import json
import os
import struct

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_safetensors")


def safetensors(tensors, metadata=None, pad=0):
    """tensors: [(name, dtype, shape, bytes)] laid out back to back."""
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode() + b" " * pad
    return struct.pack("<Q", len(text)) + text + data


def words(values):
    return struct.pack(f"<{len(values)}i", *values)


def main():
    os.makedirs(FOLDER, exist_ok=True)
    gptq = [("model.layers.0.self_attn.q_proj.qweight", "I32", [4, 8], words(range(32))),
            ("model.layers.0.self_attn.q_proj.qzeros", "I32", [1, 1], words([0x77777777])),
            ("model.layers.0.self_attn.q_proj.scales", "F16", [1, 8], struct.pack("<8e", *[0.01] * 8)),
            ("model.layers.0.self_attn.q_proj.g_idx", "I32", [32], words([0] * 32))]
    awq = [("model.layers.0.mlp.up_proj.qweight", "I32", [32, 1], words(range(32))),
           ("model.layers.0.mlp.up_proj.qzeros", "I32", [1, 1], words([0x12345678])),
           ("model.layers.0.mlp.up_proj.scales", "F16", [1, 8], struct.pack("<8e", *[0.5] * 8)),
           ("model.layers.0.mlp.up_proj.bias", "F16", [8], struct.pack("<8e", *[0.0] * 8))]
    odd = [("empty", "F32", [0], b""), ("b", "BF16", [2, 1], b"\x80\x3f\x00\x40"), ("u", "U8", [3], b"abc"),
           ("l", "I64", [1], struct.pack("<q", -1))]
    seeds = {"gptq.safetensors": safetensors(gptq, {"format": "pt"}),
             "awq.safetensors": safetensors(awq),
             "odd.safetensors": safetensors(odd, {"note": "seed"}, pad=5)}
    for name, data in seeds.items():
        with open(os.path.join(FOLDER, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
