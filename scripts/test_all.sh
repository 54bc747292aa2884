#!/usr/bin/env bash
# Runs every stage of the test suite and fails at the end if any stage
# failed, with one summary of passed/failed/skipped tests per stage and the
# reason of every skip (scripts/test_summary.py). A failing stage never stops
# the stages after it: a red unit suite must not hide what the sanitizers or
# the fuzzers would have found.
#
# Usage: scripts/test_all.sh [STAGE...]   (no argument: every stage)
# Stages: setup format build unit e2e unit-avx2 e2e-avx2 unit-scalar e2e-scalar
# asan tsan fuzz aarch64 (setup: scripts/setup.sh, timed like the others, since
# a fresh machine spends minutes there; format: every C++ file matches .clang-format,
# src/ stays within the size budget of scripts/check_code_size.py, and
# docs/architecture.md names only files and members that exist; the
# -avx2/-scalar ones exist only where the CPU runs a better ISA, so each
# ISA's kernels run the suites on a machine that could otherwise hide them; e2e-scalar leaves out the suites labelled isa-slow, the 270M model;
# aarch64 cross-builds the libraries and unit tests for AArch64 and runs them
# under qemu-user with the NEON kernels, on an x86-64 host).
#
# Environment: JOBS (parallel tests, default nproc), TEST_RESULTS (results
# folder, default test-results), CI=true or TOKENMILL_STRICT=1 (a skip for a
# missing dependency is a failure), TOKENMILL_EXPECT_ISA (default: what
# scripts/cpu_isa.sh reads from /proc/cpuinfo; the dispatch tests fail if
# tokenmill detects less).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
JOBS=${JOBS:-$(nproc)}
BUILD=${BUILD:-build}
ASAN_BUILD=${ASAN_BUILD:-build-asan}
TSAN_BUILD=${TSAN_BUILD:-build-tsan}
ARM_BUILD=${ARM_BUILD:-build-aarch64}
results=${TEST_RESULTS:-$root/test-results}
case "$results" in /*) ;; *) results="$root/$results" ;; esac
export TOKENMILL_EXPECT_ISA=${TOKENMILL_EXPECT_ISA:-$(scripts/cpu_isa.sh)}
# Sanitizer reports must fail the process that hit them.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

# The ISAs below the best one, each forced in its own stages.
lower_isas=()
case "$TOKENMILL_EXPECT_ISA" in
  avx512) lower_isas=(avx2 scalar) ;;
  avx2) lower_isas=(scalar) ;;
esac
all_stages=(setup format build unit e2e)
for isa in "${lower_isas[@]}"; do all_stages+=("unit-$isa" "e2e-$isa"); done
all_stages+=(asan tsan fuzz)
[[ "$(uname -m)" == x86_64 ]] && all_stages+=(aarch64)
stages=("$@")
((${#stages[@]})) || stages=("${all_stages[@]}")


# ctest_run DIR LABEL OUT [VAR=VALUE...] [CTEST ARGS...]: one ctest pass;
# JUnit results of ctest and of every pytest suite it ran go to OUT.
ctest_run() {
  local dir=$1 label=$2 out=$3
  shift 3
  local vars=()
  while (($#)) && [[ "$1" == *=* ]]; do vars+=("$1"); shift; done
  rm -rf "$dir/test-results"
  env "${vars[@]}" ctest --test-dir "$dir" -L "$label" --output-on-failure -j "$JOBS" \
    --output-junit "$out/ctest.xml" "$@"
  local rc=$?
  [[ -d "$dir/test-results/pytest" ]] && cp "$dir"/test-results/pytest/*.xml "$out/" 2>/dev/null
  return $rc
}

# Every build here compiles each library and test binary as one unity
# source (CMake's UNITY_BUILD with no batch limit: the heavy headers, CLI11,
# JSON, httplib, gtest, are parsed and their templates instantiated once per
# target, not once per file). On two cores that takes about half the time
# of file-by-file builds, and 40 % less than batches of 8 files (a fresh ASan
# build: 1036 against 1857 CPU-seconds); there are still more targets than
# cores. `make build` (and `make run`) in a fresh clone compiles every file
# on its own, so a file that only compiles after another one's includes
# still fails there.
unity=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0)

configure_and_build() {  # DIR [cmake args...]
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null && cmake --build "$dir" -j "$(nproc)"
}

# The sanitizer builds keep DCHECKs (Debug) but optimise (-O1): the
# end-to-end suites run real models through them. -g1 (line tables) is
# enough for the reports' stack traces and compiles faster than -g.
sanitizer_flags=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-g1 -O1")
# On a CPU without AVX-512 their kernel tests skip, so the sanitizer builds
# leave out those kernels, the slowest files to compile under a sanitizer
# (the release build still compiles them, and the unit stages check the
# AVX-512 table's contents).
[[ "$TOKENMILL_EXPECT_ISA" == avx512 ]] || sanitizer_flags+=(-DTOKENMILL_AVX512_KERNELS=OFF)

# One clang build serves the asan and fuzz stages: ASan + UBSan for the
# unit and end-to-end suites, and the libFuzzer targets beside them (the
# fuzzed libraries carry coverage instrumentation, which the other binaries
# ignore). One build instead of two, and clang compiles it faster than g++.
configure_asan() {
  CC=clang CXX=clang++ cmake -S . -B "$ASAN_BUILD" -G Ninja "${sanitizer_flags[@]}" "${unity[@]}" \
    -DTOKENMILL_SANITIZE=address -DTOKENMILL_FUZZ=ON >/dev/null
}
build_asan() { configure_asan && cmake --build "$ASAN_BUILD" -j "$(nproc)"; }

# The TSan stage: the code with threads of its own (thread pool, engine
# thread, scheduler driven by it, HTTP server) and the server end to end.
tsan_binaries=(src/util/tm_util_test src/sched/tm_sched_test src/engine/tm_engine_test src/server/tm_server_test)
build_tsan() {
  cmake -S . -B "$TSAN_BUILD" -G Ninja "${sanitizer_flags[@]}" "${unity[@]}" -DTOKENMILL_SANITIZE=thread >/dev/null &&
    cmake --build "$TSAN_BUILD" -j "$(nproc)" --target "${tsan_binaries[@]##*/}" tokenmill
}

# The AArch64 stage's suites: the kernels (NEON), everything that runs a
# model through them, and the code that reads bytes and text (char is
# unsigned on AArch64; unaligned loads). The HTTP server, scheduler, router,
# benchmark client, CLI, evaluation, distributed and speculation suites are
# platform-neutral logic: not built there.
arm_suites=(tm_util_test tm_gguf_test tm_kernels_test tm_model_test tm_quant_test tm_tokenizer_test tm_kv_test
  tm_sample_test tm_engine_test tm_grammar_test)
arm_skipped_suites=(tm_server_test tm_sched_test tm_spec_test tm_eval_test tm_dist_test tm_runner_test
  tm_router_test tm_bench_test tm_cli_test)
# Libraries and unit tests only (TOKENMILL_TOOLS=OFF: Debian 12 cannot
# install the benchmark client's yaml-cpp for two architectures).
build_aarch64() {
  cmake -S . -B "$ARM_BUILD" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DTOKENMILL_TOOLS=OFF \
    -DCMAKE_BUILD_TYPE=Release "${unity[@]}" >/dev/null &&
    cmake --build "$ARM_BUILD" -j "$(nproc)" --target "${arm_suites[@]}"
}

# Sets cpu_seconds to the user + system CPU seconds of this (sub)shell's
# finished children so far: the second line of bash's `times`, which must
# run in the shell itself (in a pipe or $(...) it would count a new
# subshell's children, none).
children_cpu_seconds() {
  local file="$results/.times.$BASHPID"
  times >"$file"
  cpu_seconds=$(awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); n += a[1] * 60 + a[2] } printf "%d\n", n }' "$file")
  rm -f "$file"
}
# Left out of the ASan stage (see there).
asan_skipped_tests='GrammarMatcher\.MasksEqualTheReference'
# Minutes each under emulation, and kernel-independent: the speculative
# decoding and grammar-mask cross-checks (they run natively in unit and
# unit-scalar, the speculative ones also under ASan; the NEON kernels under
# them are tested directly).
arm_skipped_tests='EngineSpecMethods\.KvPoolIsWholeAfterRandomRequestsWithCancels|EngineSpec\.Sampled|GrammarMatcher\.MasksEqualTheReference'

run_stage() {  # NAME OUT
  local name=$1 out=$2
  case "$name" in
    setup) scripts/setup.sh ;;
    format)
      # All run, so one report names every formatting, size and doc problem.
      local rc=0
      scripts/format.sh --check || rc=1
      python3 scripts/check_code_size.py || rc=1
      python3 scripts/check_architecture_doc.py || rc=1
      return $rc
      ;;
    build) configure_and_build "$BUILD" -DCMAKE_BUILD_TYPE=Release "${unity[@]}" ;;
    unit) ctest_run "$BUILD" unit "$out" ;;
    e2e) ctest_run "$BUILD" e2e "$out" ;;
    unit-*) ctest_run "$BUILD" unit "$out" "TOKENMILL_ISA=${name#unit-}" ;;
    e2e-scalar) ctest_run "$BUILD" isa "$out" TOKENMILL_ISA=scalar -LE isa-slow ;;
    e2e-*) ctest_run "$BUILD" isa "$out" "TOKENMILL_ISA=${name#e2e-}" ;;
    asan)
      build_asan || return 1
      # All but the 270M suites labelled isa-slow (minutes under ASan: the
      # numerical ones and server_spec; the same model's load, forward and
      # serving paths run in server_gemma, the speculative ones on the tiny
      # model in engine_spec_test), and those labelled no-asan (structured
      # output on the 270M model, the grammar code runs under ASan in its
      # unit tests and engine_grammar_test; the numerical agreement and
      # quantization-quality suites, whose code the unit tests cover).
      # The grammar masks' cross-checks against their reference (a minute
      # and a half under ASan) are left out as under emulation: the same
      # matcher code runs under ASan in the other grammar tests and the
      # grammar fuzzer, and the cross-checks natively in unit and
      # unit-scalar.
      ctest_run "$ASAN_BUILD" "unit|e2e" "$out" TOKENMILL_TEST_QUICK=1 -LE "isa-slow|no-asan" \
        -E "$asan_skipped_tests"
      ;;
    tsan)
      build_tsan || return 1
      local rc=0 bin
      for bin in "${tsan_binaries[@]}"; do
        # Quick property rounds (a fifth), as under ASan: the speculative
        # decoding pool checks alone took 400 s here at full count.
        (cd "$root" && TOKENMILL_SHARED="$root/../shared" TOKENMILL_TEST_QUICK=1 "$TSAN_BUILD/$bin" \
          --gtest_output="xml:$out/${bin##*/}.xml") || rc=1
      done
      ctest_run "$TSAN_BUILD" tsan "$out" || rc=1
      return $rc
      ;;
    fuzz)
      # The fuzz targets are part of the ASan build (nothing left to build
      # after the asan stage); run alone, this builds just them.
      configure_asan && cmake --build "$ASAN_BUILD" -j "$(nproc)" --target fuzz_targets &&
        scripts/fuzz_smoke.sh "$ASAN_BUILD"
      ;;
    aarch64)
      # Speed under emulation means nothing; correctness against the scalar
      # references and the stories260K reference does. Only the suites whose
      # code can differ on AArch64 are built and run (arm_suites); the
      # others are platform-neutral logic that the native stages cover.
      build_aarch64 || return 1
      local not_built
      not_built=$(printf '%s_NOT_BUILT|' "${arm_skipped_suites[@]}")
      ctest_run "$ARM_BUILD" unit "$out" TOKENMILL_EXPECT_ISA=neon TOKENMILL_TEST_QUICK=1 --timeout 600 \
        -E "^(${not_built%|})\$|${arm_skipped_tests}"
      ;;
    *) echo "unknown stage '$name' (stages: ${all_stages[*]})"; return 2 ;;
  esac
}

# In a function, read whole before it runs: bash reads a script as it goes,
# so an edit during a 40-minute run would otherwise change the run.
main() {
  local name out start rc
  rm -rf "$results"
  mkdir -p "$results"
  printf 'start\t%s\n' "$(date +%s)" >"$results/run.tsv"
  # Expensive reference results computed by one stage and reused by the
  # next ones of this run only (tests/python/test_gemma_reference.py).
  export TOKENMILL_TEST_CACHE="$results/cache"
  echo "tests: expected ISA $TOKENMILL_EXPECT_ISA (from /proc/cpuinfo); stages: ${stages[*]}"
  for name in "${stages[@]}"; do
    out="$results/$name"
    mkdir -p "$out"
    echo
    echo "======== stage $name ========"
    start=$(date +%s)
    # The stage's CPU time is read in the subshell that runs it (see
    # children_cpu_seconds).
    {
      run_stage "$name" "$out"
      rc=$?
      children_cpu_seconds
      echo "$cpu_seconds" >"$out/cpu_seconds"
      exit $rc
    } 2>&1 | tee "$out/log.txt"
    rc=${PIPESTATUS[0]}
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - start))" "$(cat "$out/cpu_seconds" 2>/dev/null)" \
      >>"$results/stages.tsv"
  done
  printf 'end\t%s\n' "$(date +%s)" >>"$results/run.tsv"
  python3 scripts/test_summary.py "$results"
}

main
