"""scripts/test_summary.py, the summary `make test` ends with, on hand-made
results in the three JUnit dialects it reads (ctest, pytest, gtest) and a
fuzz log: counts per stage, skip reasons, pytest suites counted by their
own tests, failures that happen outside any test, strict mode, exit status."""
import os
import subprocess
import sys

from conftest import REPO

SUMMARY = os.path.join(REPO, "scripts", "test_summary.py")

CTEST = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="x" tests="4">
  <testcase name="Kernels.Pass" classname="Kernels.Pass" status="run"><system-out>ok</system-out></testcase>
  <testcase name="Kernels.Skip" classname="Kernels.Skip" status="notrun"><skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
    <system-out>[ RUN      ] Kernels.Skip
/src/kernels/x_test.cc:12: Skipped
no AVX-512 F/BW/VNNI on this CPU
[  SKIPPED ] Kernels.Skip (0 ms)</system-out></testcase>
  <testcase name="Kernels.Fail" classname="Kernels.Fail" status="fail"><failure message="Failed"/></testcase>
  <testcase name="suite_a" classname="suite_a" status="run"/>
  <testcase name="suite_b" classname="suite_b" status="fail"/>
</testsuite>
"""

PYTEST_A = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="suite_a" tests="3">
<testcase classname="tests.python.test_a" name="test_one"/>
<testcase classname="tests.python.test_a" name="test_two"/>
<testcase classname="tests.python.test_a" name="test_three"><skipped type="pytest.skip"
 message="missing dependency: PyPI package llama-cpp-python (reference) is not installed">x</skipped></testcase>
</testsuite></testsuites>
"""

# A suite whose process died after its tests passed (a crash at exit, a
# timeout): ctest says fail, pytest's own file says nothing failed.
PYTEST_B = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="suite_b" tests="1">
<testcase classname="tests.python.test_b" name="test_only"/>
</testsuite></testsuites>
"""

GTEST = """<?xml version="1.0" encoding="UTF-8"?><testsuites tests="2" name="AllTests">
<testsuite name="ThreadPool" tests="2">
<testcase name="Runs" status="run" result="completed" classname="ThreadPool"/>
<testcase name="OpenMp" status="run" result="skipped" classname="ThreadPool"><skipped message="/src/util/t.cc:84&#x0A;this build has no OpenMP"/></testcase>
</testsuite></testsuites>
"""

FUZZ_LOG = """fuzz-smoke: fuzz_gguf for 15s
Done 1000 runs in 16 second(s)
fuzz-smoke: fuzz_chat_template for 15s
fuzz-smoke: fuzz_chat_template FAILED (exit status 1); crashing input in artifacts
"""


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def summarize(results, strict=False):
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TOKENMILL_STRICT")}
    if strict:
        env["CI"] = "true"
    return subprocess.run([sys.executable, SUMMARY, str(results)], capture_output=True, text=True, env=env)


def stage_row(out, name):
    return next(line.split() for line in out.splitlines() if line.startswith(name + " "))


def test_counts_reasons_and_failures_per_stage(tmp_path):
    write(tmp_path / "unit" / "ctest.xml", CTEST)
    write(tmp_path / "unit" / "suite_a.xml", PYTEST_A)
    write(tmp_path / "unit" / "suite_b.xml", PYTEST_B)
    write(tmp_path / "tsan" / "tm_util_test.xml", GTEST)
    write(tmp_path / "fuzz" / "log.txt", FUZZ_LOG)
    write(tmp_path / "build" / "log.txt", "")
    write(tmp_path / "stages.tsv", "build\t2\t61\nunit\t8\t30\ntsan\t0\t5\nfuzz\t1\t40\n")
    p = summarize(tmp_path)
    assert p.returncode == 1, p.stdout
    # unit: 1 gtest pass + 2 pytest passes of suite_a + 1 of suite_b; the
    # gtest failure and suite_b's death outside a test; 2 skips.
    assert stage_row(p.stdout, "unit") == ["unit", "FAILED", "4", "2", "2", "0m30s"]
    assert stage_row(p.stdout, "tsan") == ["tsan", "ok", "1", "0", "1", "0m05s"]
    assert stage_row(p.stdout, "fuzz") == ["fuzz", "FAILED", "1", "1", "0", "0m40s"]
    assert stage_row(p.stdout, "build")[:2] == ["build", "FAILED"]
    assert "skipped  [unit] Kernels.Skip: no AVX-512 F/BW/VNNI on this CPU" in p.stdout
    assert "skipped  [tsan] tm_util_test: ThreadPool.OpenMp: this build has no OpenMP" in p.stdout
    assert "missing dependency: PyPI package llama-cpp-python" in p.stdout
    assert "FAILED   [unit] suite_b (suite)" in p.stdout
    assert "FAILED   [unit] Kernels.Fail" in p.stdout
    assert "FAILED   [fuzz] fuzz_chat_template" in p.stdout
    assert "FAILED   [build] the stage exited with status 2" in p.stdout
    # The build failure has no failing test, yet the closing line counts it.
    assert p.stdout.rstrip().splitlines()[-1] == "summary: 6 passed, 4 failed, 3 skipped"


def test_strict_mode_fails_a_stage_with_a_missing_dependency_skip(tmp_path):
    write(tmp_path / "e2e" / "ctest.xml", CTEST.replace('status="fail"', 'status="run"').replace(
        '<failure message="Failed"/>', ""))
    write(tmp_path / "e2e" / "suite_a.xml", PYTEST_A)
    write(tmp_path / "e2e" / "suite_b.xml", PYTEST_B)
    write(tmp_path / "stages.tsv", "e2e\t0\t12\n")
    relaxed = summarize(tmp_path)
    assert relaxed.returncode == 0, relaxed.stdout
    assert stage_row(relaxed.stdout, "e2e")[:2] == ["e2e", "ok"]
    strict = summarize(tmp_path, strict=True)
    assert strict.returncode == 1, strict.stdout
    assert "FAILED   [e2e] skipped for a missing dependency in strict mode" in strict.stdout


def test_times_cpu_and_the_slowest_tests(tmp_path):
    """Each stage's CPU seconds and cores, the whole run's wall time, and
    every test's time (ctest, pytest and gtest dialects) to test_times.tsv,
    slowest first."""
    write(tmp_path / "unit" / "ctest.xml", CTEST.replace('name="Kernels.Pass" classname="Kernels.Pass" status="run"',
                                                         'name="Kernels.Pass" classname="Kernels.Pass" status="run" time="2.5"'))
    write(tmp_path / "unit" / "suite_a.xml", PYTEST_A.replace('name="test_two"', 'name="test_two" time="40.25"'))
    write(tmp_path / "unit" / "suite_b.xml", PYTEST_B)
    write(tmp_path / "tsan" / "tm_util_test.xml", GTEST.replace('name="Runs" status="run"', 'name="Runs" time="7" status="run"'))
    write(tmp_path / "stages.tsv", "unit\t0\t30\t54\ntsan\t0\t100\t150\n")
    write(tmp_path / "run.tsv", "start\t1000\nend\t1754\n")
    p = summarize(tmp_path)
    assert stage_row(p.stdout, "unit")[5:] == ["0m30s", "54", "x1.8"]
    assert stage_row(p.stdout, "tsan")[5:] == ["1m40s", "150", "x1.5"]
    assert stage_row(p.stdout, "whole")[-1] == "12m34s"
    slowest = p.stdout.split("slowest 3 tests")[1].splitlines()[1:4]
    assert [line.split()[0] for line in slowest] == ["40.2", "7.0", "2.5"]
    assert slowest[0].endswith("[unit] suite_a::tests.python.test_a.test_two")
    assert slowest[1].endswith("[tsan] tm_util_test: ThreadPool.Runs")
    rows = (tmp_path / "test_times.tsv").read_text().splitlines()
    assert rows[0] == "seconds\tstage\ttest" and rows[1] == "40.25\tunit\tsuite_a::tests.python.test_a.test_two"
    assert len(rows) == 4


def test_every_python_test_file_runs_in_make_test():
    """A test_*.py that defines tests but is not registered in
    tests/CMakeLists.txt would never run in `make test`, and nothing would say so."""
    import glob
    import re
    cmake = open(os.path.join(REPO, "tests", "CMakeLists.txt")).read()
    registered = set(re.findall(r"tm_add_pytest\(\S+\s+(test_\w+\.py)", cmake))
    with_tests = {os.path.basename(p) for p in glob.glob(os.path.join(REPO, "tests", "python", "test_*.py"))
                  if re.search(r"^(async )?def test_", open(p).read(), re.M)}
    assert with_tests, "no test files found"
    assert with_tests - registered == set(), f"not registered in tests/CMakeLists.txt: {sorted(with_tests - registered)}"
