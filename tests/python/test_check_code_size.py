"""scripts/check_code_size.py, the size budget `make test` checks, on small
trees made here: a function over 60 lines and a file over 500 lines fail
with their place, name and length; test files and a clean tree pass; a
comment that would hide a function from lizard is refused."""
import os
import subprocess
import sys

from conftest import REPO, require_module

SCRIPT = os.path.join(REPO, "scripts", "check_code_size.py")

require_module("lizard", "lizard", "function lengths")


def function(name, lines):
    """A C++ function of `lines` lines (at least 3)."""
    body = "".join(f"  x += {i};\n" for i in range(lines - 3))
    return f"int {name}(int x) {{\n{body}  return x;\n}}\n"


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def check(root):
    return subprocess.run([sys.executable, SCRIPT, "--root", str(root)], capture_output=True, text=True, timeout=120)


def test_clean_tree_passes(tmp_path):
    write(tmp_path, "src/lib/small.cc", "// A file within budget.\n" + function("fits", 60))
    write(tmp_path, "src/lib/small.h", "#pragma once\ninline " + function("fits_too", 60))
    r = check(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 files under src/ within budget" in r.stdout


def test_long_function_fails_naming_it(tmp_path):
    # 3 lines before it: the function starts on line 4 and spans 61 lines.
    write(tmp_path, "src/lib/long.cc", "// One function\n// over budget.\n\n" + function("too_long", 61))
    r = check(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "src/lib/long.cc:4: function too_long has 61 lines (limit 60)" in r.stdout


def test_long_function_in_header_fails(tmp_path):
    write(tmp_path, "src/lib/inline.h", "#pragma once\ninline " + function("header_body", 72))
    r = check(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "src/lib/inline.h:2: function header_body has 72 lines" in r.stdout


def test_long_file_fails_naming_it(tmp_path):
    # 9 functions of 57 lines: none over budget, the file (513 lines) is.
    write(tmp_path, "src/lib/big.cc", "".join(function(f"part{i}", 57) for i in range(9)))
    r = check(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "src/lib/big.cc:1: the file has 513 lines (limit 500)" in r.stdout
    assert "function" not in r.stdout.split("code size:")[0]


def test_tests_are_exempt(tmp_path):
    long_file = "".join(function(f"case{i}", 80) for i in range(8))
    write(tmp_path, "src/lib/lib_test.cc", long_file)
    write(tmp_path, "src/lib/test_util.h", long_file)
    write(tmp_path, "src/lib/thing_test_util.h", long_file)
    write(tmp_path, "src/lib/ok.cc", function("fits", 10))
    r = check(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 files under src/ within budget" in r.stdout


def test_forgiveness_comment_is_refused(tmp_path):
    write(tmp_path, "src/lib/hidden.cc", "// #lizard forgives\n" + function("hidden", 70))
    r = check(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "src/lib/hidden.cc:1: a '#lizard forgives' comment" in r.stdout


def test_only_src_is_read(tmp_path):
    write(tmp_path, "tools/gen.cc", function("elsewhere", 100))
    write(tmp_path, "src/lib/ok.cc", function("fits", 10))
    r = check(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
