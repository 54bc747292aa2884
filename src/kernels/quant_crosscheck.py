#!/usr/bin/env python3
"""Decodes GGUF tensor bytes with the PyPI `gguf` package's dequantizer.

An independent decoder for quant_crosscheck_test.cc: it catches layout
mistakes in tokenmill's blocks, which a test written against our own
reading of the format cannot.

Usage: quant_crosscheck.py DIR TYPE...
For each TYPE (a GGUF type name such as Q4_K), reads DIR/TYPE.bin (raw
blocks) and writes DIR/TYPE.f32 (little-endian float32 values). Prints
"unsupported TYPE: reason" for types this gguf version cannot decode.
Exit status 3 when numpy or gguf cannot be imported (the test then skips).
"""
import os
import sys

try:
    import numpy as np
    import gguf
    from gguf import quants
except Exception as exc:  # any import failure means: no independent decoder here
    print(f"cannot import gguf/numpy: {exc}")
    sys.exit(3)


def decode(directory: str, name: str) -> None:
    qtype = getattr(gguf.GGMLQuantizationType, name, None)
    if qtype is None:
        print(f"unsupported {name}: no such type in gguf {gguf.__name__}")
        return
    raw = np.fromfile(os.path.join(directory, name + ".bin"), dtype=np.uint8)
    _, type_size = gguf.GGML_QUANT_SIZES[qtype]
    if raw.size % type_size != 0:
        print(f"unsupported {name}: gguf expects {type_size}-byte blocks")
        return
    try:
        values = quants.dequantize(raw, qtype)
    except NotImplementedError as exc:
        print(f"unsupported {name}: {exc}")
        return
    np.asarray(values, dtype="<f4").ravel().tofile(os.path.join(directory, name + ".f32"))


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    for name in sys.argv[2:]:
        decode(sys.argv[1], name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
