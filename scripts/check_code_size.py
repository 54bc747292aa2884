#!/usr/bin/env python3
"""The size budget of the project's conventions, as a check: no source file
under src/ over 500 lines and no function over 60 lines, except the files
and functions of ALLOWED below (each with its reason) and the test code of
TEST_FILE_PATTERNS. Function lengths are lizard's (first to last line of the
function, comments and blank lines included), the same number as
`python3 -m lizard -L 60` reports.

Usage: scripts/check_code_size.py [--root DIR]   (DIR: the checkout; default
this script's). Prints every file and function over budget as
`path:line: ...` and exits 1; exits 0 when there are none. Part of the
`format` stage of scripts/test_all.sh (`make test`, `make check`).
"""
import argparse
import fnmatch
import os
import sys

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 60
SOURCE_SUFFIXES = (".cc", ".h")

# Test code, exempt by name wherever it is under src/: unit tests beside
# their module (*_test.cc), the helpers only they include (test_util.h,
# *_test_util.h, test_harness.h, test_gguf_variants.h, test_policy_cases.h,
# test_dependency.h ...) and fuzz targets (*_fuzz.cc; today they all live
# in fuzz/, outside src/, which this check does not read).
TEST_FILE_PATTERNS = ("*_test.cc", "*_test.h", "*_test_util.h", "test_*.h", "test_*.cc", "*_fuzz.cc")

# Exceptions by path (relative to the checkout), each with its reason:
# "src/dir/file.cc" exempts the whole file (its length and its functions),
# "src/dir/file.cc:function" one function of it (the name as reported
# below, namespaces included). Generated tables belong here; src/ holds
# none today (the kernel tables, kernels/*/tables_*.cc, are written by hand
# and kept within the budget). Add an entry only with a reason a reviewer
# can check, never to get a change past the check.
ALLOWED = {}

# lizard skips a function whose source carries this comment; the exceptions
# belong in ALLOWED, where they are reviewed, so the comment is refused.
FORGIVE_MARKER = "lizard forgive"


def load_lizard():
    try:
        import lizard  # noqa: PLC0415 (imported here to name the fix when missing)
    except ModuleNotFoundError:
        sys.exit("check_code_size: the PyPI package lizard is not installed (scripts/setup.sh installs it)")
    return lizard


def is_test_file(path):
    name = os.path.basename(path)
    return any(fnmatch.fnmatch(name, pattern) for pattern in TEST_FILE_PATTERNS)


def source_files(root):
    """The checked files: every .cc and .h under root/src but the tests."""
    files = []
    for folder, dirs, names in os.walk(os.path.join(root, "src")):
        dirs.sort()
        for name in sorted(names):
            path = os.path.relpath(os.path.join(folder, name), root)
            if name.endswith(SOURCE_SUFFIXES) and not is_test_file(path):
                files.append(path)
    return files


def file_problems(lizard, root, path):
    """The budget violations of one file, as (line, message) pairs."""
    if path in ALLOWED:
        return []
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        text = f.read()
    problems = []
    lines = text.splitlines()
    if len(lines) > MAX_FILE_LINES:
        problems.append((1, f"the file has {len(lines)} lines (limit {MAX_FILE_LINES}): split it by responsibility"))
    for number, line in enumerate(lines, start=1):
        if FORGIVE_MARKER in line:
            problems.append((number, f"a '#{FORGIVE_MARKER}s' comment hides code from this check; list the exception "
                                     "in ALLOWED of scripts/check_code_size.py instead"))
    info = lizard.analyze_file.analyze_source_code(path, text)
    for function in info.function_list:
        if function.length > MAX_FUNCTION_LINES and f"{path}:{function.name}" not in ALLOWED:
            problems.append((function.start_line, f"function {function.name} has {function.length} lines "
                                                  f"(limit {MAX_FUNCTION_LINES})"))
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        help="the checkout to check (default: this script's)")
    args = parser.parse_args()
    lizard = load_lizard()
    files = source_files(args.root)
    problems = []
    for path in files:
        problems += [(path, line, message) for line, message in file_problems(lizard, args.root, path)]
    if problems:
        for path, line, message in problems:
            print(f"{path}:{line}: {message}")
        print(f"code size: {len(problems)} over budget in {len(files)} files under src/ (files <= {MAX_FILE_LINES} "
              f"lines, functions <= {MAX_FUNCTION_LINES}; tests excepted). Split them, or add a reviewed exception "
              "with its reason to ALLOWED in scripts/check_code_size.py.")
        return 1
    print(f"code size: {len(files)} files under src/ within budget (files <= {MAX_FILE_LINES} lines, "
          f"functions <= {MAX_FUNCTION_LINES})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
