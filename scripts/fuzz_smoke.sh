#!/usr/bin/env bash
# Runs every libFuzzer target in BUILD/fuzz for a short fixed time, starting
# from its seed corpus in fuzz/corpus/NAME when there is one (the seeds are
# only read; new inputs go to a temporary folder). Runs from the repository
# root. Exits non-zero if any target crashes, leaks, hangs or reports
# undefined behaviour; the crashing input is kept in BUILD/fuzz/artifacts.
set -euo pipefail
build=${1:-build-fuzz}
seconds=${FUZZ_SECONDS:-15}
root=$(pwd)
case "$build" in /*) ;; *) build="$root/$build" ;; esac
shopt -s nullglob
targets=()
for t in "$build"/fuzz/fuzz_*; do [[ -f "$t" && -x "$t" ]] && targets+=("$t"); done
if ((${#targets[@]} == 0)); then echo "fuzz-smoke: no fuzz targets built in $build/fuzz"; exit 1; fi
artifacts="$build/fuzz/artifacts"
mkdir -p "$artifacts"
failed=()
for t in "${targets[@]}"; do
  name=$(basename "$t")
  work=$(mktemp -d)
  mkdir "$work/corpus"
  seeds=()
  [[ -d "$root/fuzz/corpus/$name" ]] && seeds=("$root/fuzz/corpus/$name")
  echo "fuzz-smoke: $name for ${seconds}s"
  # The status is taken from the fuzzer itself, not from a pipe or subshell.
  status=0
  (cd "$work" && exec "$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -artifact_prefix="$artifacts/$name-" "$work/corpus" "${seeds[@]}") \
      >"$work/log" 2>&1 || status=$?
  if ((status == 0)); then
    tail -n 2 "$work/log"
  else
    tail -n 60 "$work/log"
    echo "fuzz-smoke: $name FAILED (exit status $status); crashing input in $artifacts"
    failed+=("$name")
  fi
  rm -rf "$work"
done
if ((${#failed[@]} > 0)); then echo "fuzz-smoke: failed: ${failed[*]}"; exit 1; fi
echo "fuzz-smoke: all targets clean"
