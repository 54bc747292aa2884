#!/usr/bin/env bash
# Runs the end-to-end suites several times in a row while busy loops take
# the same cores, to find the tests that only pass on a quiet machine (a
# race, a wait on time instead of on an event, a bound that depends on the
# machine's speed). A test that fails here is fixed where the failure comes
# from, never by widening its timeout or retrying it.
#
# Usage: scripts/stress_tests.sh [ROUNDS] [-- CTEST ARGS...]
#   ROUNDS  how many times the suites run (default 5)
# Environment: BUSY (busy-loop processes beside the tests, default 2),
#   BUILD (default build; built first if its tokenmill is missing), JOBS
#   (tests at once, default nproc), LABEL (ctest label, default e2e),
#   TEST_RESULTS (default test-results; the rounds go to its stress/ folder).
# Exit status: non-zero when any round had a failure. Each round's log and
# JUnit files are kept under TEST_RESULTS/stress/round-N, and the last lines
# name every test that failed and in which rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=5
if (($#)) && [[ "$1" != -- ]]; then rounds=$1; shift; fi
[[ "${1:-}" == -- ]] && shift
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "stress_tests: ROUNDS must be a positive integer, got '$rounds'" >&2; exit 2; }
BUSY=${BUSY:-2}
BUILD=${BUILD:-build}
JOBS=${JOBS:-$(nproc)}
LABEL=${LABEL:-e2e}
results=${TEST_RESULTS:-test-results}/stress
[[ -x "$BUILD/src/cli/tokenmill" ]] || scripts/test_all.sh build || exit 1

busy_pids=()
stop_busy() { ((${#busy_pids[@]})) && kill "${busy_pids[@]}" 2>/dev/null; wait 2>/dev/null; }
trap stop_busy EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < BUSY; i++)); do
  (while :; do :; done) &
  busy_pids+=($!)
done
echo "stress_tests: $rounds rounds of 'ctest -L $LABEL -j $JOBS' beside $BUSY busy loops (pids ${busy_pids[*]:-none})"

rm -rf "$results"
declare -A failed_in=()
bad_rounds=0
for ((round = 1; round <= rounds; round++)); do
  out="$results/round-$round"
  mkdir -p "$out"
  start=$(date +%s)
  rm -rf "$BUILD/test-results"
  ctest --test-dir "$BUILD" -L "$LABEL" -j "$JOBS" --output-on-failure --output-junit "$(pwd)/$out/ctest.xml" "$@" \
    >"$out/log.txt" 2>&1
  rc=$?
  [[ -d "$BUILD/test-results/pytest" ]] && cp "$BUILD"/test-results/pytest/*.xml "$out/" 2>/dev/null
  # ctest's "The following tests FAILED:" block names each failed suite.
  failures=$(sed -n '/The following tests FAILED:/,$p' "$out/log.txt" | sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\).*/\1/p')
  for test in $failures; do failed_in[$test]+=" $round"; done
  ((rc == 0)) || bad_rounds=$((bad_rounds + 1))
  echo "round $round: $([[ $rc == 0 ]] && echo passed || echo FAILED) in $(($(date +%s) - start)) s" \
    "${failures:+(failed: $(echo $failures))}"
done

for test in "${!failed_in[@]}"; do echo "FAILED $test in rounds${failed_in[$test]}"; done
echo "stress_tests: $((rounds - bad_rounds)) of $rounds rounds passed"
((bad_rounds == 0))
