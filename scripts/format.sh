#!/usr/bin/env bash
# Formats the project's C++ sources with clang-format (.clang-format), or
# with --check lists the files that differ and fails (formatting also ends
# with the check). The files are the tracked *.cc and *.h under src/,
# tests/, benchmarks/ and fuzz/.
#
# Usage: scripts/format.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format: clang-format is not installed (scripts/setup.sh installs it)"; exit 1; }
mapfile -t files < <(git ls-files -- 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'benchmarks/*.cc' 'benchmarks/*.h' \
  'fuzz/*.cc' 'fuzz/*.h')
formatted=0
if [[ "${1:-}" != "--check" ]]; then
  clang-format -i "${files[@]}"
  formatted=1
fi
# After formatting, the check runs too: clang-format is not always
# idempotent (a macro call without a semicolon can be re-wrapped on every
# pass), and a file it leaves differing would fail CI's format stage.
# Batches of files on every core; a file that differs is named in the
# diagnostics clang-format prints for it ("FILE:LINE:COL: error: ..."). Any
# other failure (xargs exits non-zero with no such line) fails the check too.
rc=0
out=$(printf '%s\0' "${files[@]}" | xargs -0 -n 32 -P "$(nproc)" clang-format --dry-run --Werror 2>&1) || rc=$?
mapfile -t bad < <(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*/\1/p' <<<"$out" | sort -u)
if ((rc != 0)) && ((${#bad[@]} == 0)); then
  echo "format: clang-format failed (exit $rc):"
  echo "$out"
  exit 1
fi
if ((${#bad[@]})) && ((formatted)); then
  echo "format: clang-format's output is not stable on ${#bad[@]} file(s): formatting them again changes them, so the check fails."
  echo "  Rewrite the lines it keeps re-wrapping (often a macro call without a trailing semicolon):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
if ((${#bad[@]})); then
  echo "format: ${#bad[@]} of ${#files[@]} files differ from .clang-format (run scripts/format.sh):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "format: all ${#files[@]} files match .clang-format ($(clang-format --version | head -1))"
