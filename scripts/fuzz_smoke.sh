#!/usr/bin/env bash
# Runs every libFuzzer target in BUILD/fuzz for a short fixed time, starting
# from its seed corpus in fuzz/corpus/NAME when there is one (the seeds are
# only read; new inputs go to a temporary folder). Runs from the repository
# root. Exits non-zero if any target crashes, leaks, hangs or reports
# undefined behaviour; the crashing input is kept in BUILD/fuzz/artifacts.
# Targets run JOBS at a time (default: the number of CPUs); each one is a
# single process, and their logs are printed whole, one target after another.
set -euo pipefail
build=${1:-build-asan}
seconds=${FUZZ_SECONDS:-15}
jobs=${JOBS:-$(nproc)}
root=$(pwd)
case "$build" in /*) ;; *) build="$root/$build" ;; esac
shopt -s nullglob
targets=()
for t in "$build"/fuzz/fuzz_*; do [[ -f "$t" && -x "$t" ]] && targets+=("$t"); done
if ((${#targets[@]} == 0)); then echo "fuzz-smoke: no fuzz targets built in $build/fuzz"; exit 1; fi
artifacts="$build/fuzz/artifacts"
mkdir -p "$artifacts"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# fuzz_one TARGET: runs it; its report goes to $logs/NAME.log, and
# $logs/NAME.failed exists when it failed.
fuzz_one() {
  local t=$1 name work status=0
  name=$(basename "$t")
  work=$(mktemp -d)
  mkdir "$work/corpus"
  local seeds=()
  [[ -d "$root/fuzz/corpus/$name" ]] && seeds=("$root/fuzz/corpus/$name")
  # The status is taken from the fuzzer itself, not from a pipe or subshell.
  (cd "$work" && exec "$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -artifact_prefix="$artifacts/$name-" "$work/corpus" "${seeds[@]}") \
      >"$work/log" 2>&1 || status=$?
  {
    echo "fuzz-smoke: $name for ${seconds}s"
    if ((status == 0)); then
      tail -n 2 "$work/log"
    else
      tail -n 60 "$work/log"
      echo "fuzz-smoke: $name FAILED (exit status $status); crashing input in $artifacts"
      touch "$logs/$name.failed"
    fi
  } >"$logs/$name.log"
  rm -rf "$work"
}

running=0
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
failed=()
for t in "${targets[@]}"; do
  name=$(basename "$t")
  cat "$logs/$name.log"
  [[ -e "$logs/$name.failed" ]] && failed+=("$name")
done
if ((${#failed[@]} > 0)); then echo "fuzz-smoke: failed: ${failed[*]}"; exit 1; fi
echo "fuzz-smoke: all targets clean"
