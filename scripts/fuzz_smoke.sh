#!/usr/bin/env bash
# Runs every libFuzzer target in BUILD/fuzz for a short fixed time, starting
# from its seed corpus in fuzz/corpus/NAME when there is one. Fails on the
# first crash, leak or sanitizer report.
set -euo pipefail
build=${1:-build-fuzz}
seconds=${FUZZ_SECONDS:-20}
shopt -s nullglob
targets=("$build"/fuzz/fuzz_*)
if ((${#targets[@]} == 0)); then echo "fuzz-smoke: no fuzz targets built"; exit 1; fi
for t in "${targets[@]}"; do
  name=$(basename "$t")
  work=$(mktemp -d)
  corpus=(); [ -d "fuzz/corpus/$name" ] && corpus=("fuzz/corpus/$name")
  echo "fuzz-smoke: $name for ${seconds}s"
  (cd "$work" && "$OLDPWD/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 "$work" \
      "${corpus[@]/#/$OLDPWD/}" 2>&1 | tail -n 3)
  status=${PIPESTATUS[0]}
  rm -rf "$work"
  [ "$status" -eq 0 ] || { echo "fuzz-smoke: $name failed"; exit 1; }
done
echo "fuzz-smoke: all targets clean"
