#!/usr/bin/env bash
# Formats the project's C++ sources with clang-format (.clang-format), or
# with --check lists the files that differ and fails. The files are the
# tracked *.cc and *.h under src/, tests/, benchmarks/ and fuzz/.
#
# Usage: scripts/format.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format: clang-format is not installed (scripts/setup.sh installs it)"; exit 1; }
mapfile -t files < <(git ls-files -- 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'benchmarks/*.cc' 'benchmarks/*.h' \
  'fuzz/*.cc' 'fuzz/*.h')
if [[ "${1:-}" != "--check" ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "format: ${#bad[@]} of ${#files[@]} files differ from .clang-format (run scripts/format.sh):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "format: all ${#files[@]} files match .clang-format ($(clang-format --version | head -1))"
