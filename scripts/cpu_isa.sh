#!/usr/bin/env bash
# Prints the best kernel ISA this CPU has, read from /proc/cpuinfo (not from
# tokenmill's own detection, which the test suite checks against it):
# avx512 (AVX-512 F, BW and VNNI with AVX2, FMA and F16C), avx2 (AVX2, FMA
# and F16C) or scalar. The test runner exports it as TOKENMILL_EXPECT_ISA.
set -euo pipefail
flags=$(grep -m1 -E '^(flags|Features)[[:space:]]*:' /proc/cpuinfo 2>/dev/null | cut -d: -f2 || true)
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
if has avx2 fma f16c avx512f avx512bw avx512_vnni; then
  echo avx512
elif has avx2 fma f16c; then
  echo avx2
else
  echo scalar
fi
