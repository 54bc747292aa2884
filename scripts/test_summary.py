#!/usr/bin/env python3
"""Prints one summary of a scripts/test_all.sh run and exits non-zero if any
stage failed.

Reads RESULTS/stages.tsv (stage, exit status, seconds, and CPU seconds when
the runner measured them), the whole run's start and end (RESULTS/run.tsv)
and each stage's JUnit files: ctest's (ctest.xml), pytest's (one per suite, named after the
ctest test that ran it, so a pytest suite counts its own tests instead of
one ctest entry) and GoogleTest's (*_test.xml). Fuzz stages are read from
their log. Every test's wall time goes to RESULTS/test_times.tsv (slowest
first) and the 20 slowest are printed. Every skip is listed with its reason; in strict mode (CI=true or
TOKENMILL_STRICT=1) a skip for a missing dependency fails its stage, as the
tests themselves already do.

Usage: test_summary.py RESULTS
"""
import collections
import os
import re
import sys
import xml.etree.ElementTree as ET

STRICT = os.environ.get("CI") == "true" or os.environ.get("TOKENMILL_STRICT") == "1"
Counts = collections.namedtuple("Counts", "passed failed skipped")


SLOWEST_SHOWN = 20


class Stage:
    def __init__(self, name, status, seconds, cpu_seconds=None):
        self.name, self.status, self.seconds, self.cpu_seconds = name, status, seconds, cpu_seconds
        self.passed = self.failed = 0
        self.times = []     # (seconds, test)
        self.skips = []     # (test, reason)
        self.failures = []  # test names

    def add(self, test, outcome, reason="", seconds=None):
        if seconds is not None:
            self.times.append((seconds, test))
        if outcome == "passed":
            self.passed += 1
        elif outcome == "skipped":
            self.skips.append((test, reason))
        else:
            self.failed += 1
            self.failures.append(test)

    @property
    def ok(self):
        strict_skip = STRICT and any(r.startswith("missing dependency") for _, r in self.skips)
        return self.status == 0 and self.failed == 0 and not strict_skip


def first_line(text):
    """The first line that says something: gtest puts the skip's file:line
    before its message."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if len(lines) > 1 and re.fullmatch(r"\S+:\d+:?( Skipped)?", lines[0]):
        lines = lines[1:]
    return lines[0] if lines else ""


def gtest_skip_reason(output):
    """The message GTEST_SKIP printed: the lines between 'Skipped' and '[  SKIPPED ]'."""
    m = re.search(r"Skipped\n(.*?)\n\[  SKIPPED \]", output or "", re.S)
    return first_line(m.group(1)) if m else first_line(output)


def case_seconds(case):
    try:
        return float(case.get("time"))
    except (TypeError, ValueError):
        return None


def junit_cases(path):
    """(name, outcome, reason, seconds) for each testcase of a pytest or gtest JUnit file."""
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        name = ".".join(p for p in (case.get("classname"), case.get("name")) if p)
        skipped = case.find("skipped")
        seconds = case_seconds(case)
        if case.find("failure") is not None or case.find("error") is not None:
            yield name, "failed", "", seconds
        elif skipped is not None or case.get("result") == "skipped" or case.get("status") == "notrun":
            reason = skipped.get("message", "") if skipped is not None else ""
            reason = first_line(reason) or first_line(skipped.text if skipped is not None else "")
            yield name, "skipped", reason, seconds
        else:
            yield name, "passed", "", seconds


def read_ctest(stage, directory):
    """ctest's JUnit: one entry per gtest case or per pytest suite."""
    path = os.path.join(directory, "ctest.xml")
    if not os.path.exists(path):
        return
    for case in ET.parse(path).getroot().iter("testcase"):
        name, status = case.get("name"), case.get("status")
        out = case.findtext("system-out") or ""
        pytest_xml = os.path.join(directory, name + ".xml")
        if os.path.exists(pytest_xml):
            before = stage.failed
            for test, outcome, reason, seconds in junit_cases(pytest_xml):
                stage.add(f"{name}::{test}", outcome, reason, seconds)
            if status == "fail" and stage.failed == before:  # crashed or timed out outside a test
                stage.add(name + " (suite)", "failed")
        elif status == "run":
            stage.add(name, "passed", seconds=case_seconds(case))
        elif status in ("notrun", "disabled"):
            stage.add(name, "skipped", gtest_skip_reason(out))
        else:
            stage.add(name, "failed", seconds=case_seconds(case))


def read_gtest_files(stage, directory):
    for file in sorted(os.listdir(directory)):
        if file.endswith("_test.xml"):
            for test, outcome, reason, seconds in junit_cases(os.path.join(directory, file)):
                stage.add(f"{file[:-4]}: {test}", outcome, reason, seconds)


def read_fuzz_log(stage, directory):
    log = open(os.path.join(directory, "log.txt"), errors="replace").read()
    for target in re.findall(r"^fuzz-smoke: (\S+) for \d+s$", log, re.M):
        stage.add(target, "failed" if f"fuzz-smoke: {target} FAILED" in log else "passed")


def read_rows(path):
    """(name, status, seconds, cpu seconds or None) per line of a stages.tsv-like file."""
    if not os.path.exists(path):
        return []
    rows = []
    with open(path) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            cpu = int(fields[3]) if len(fields) > 3 and fields[3] else None
            rows.append((fields[0], int(fields[1]), int(fields[2]), cpu))
    return rows


def load(results):
    stages = []
    for name, status, seconds, cpu in read_rows(os.path.join(results, "stages.tsv")):
        stage = Stage(name, status, seconds, cpu)
        directory = os.path.join(results, name)
        read_ctest(stage, directory)
        read_gtest_files(stage, directory)
        if name == "fuzz":
            read_fuzz_log(stage, directory)
        stages.append(stage)
    return stages


def minutes(seconds):
    m, s = divmod(int(seconds), 60)
    return f"{m:>4}m{s:02d}s"


def cpu_column(cpu_seconds, seconds):
    """CPU seconds and the cores they kept busy on average."""
    if cpu_seconds is None:
        return f"{'':>14}"
    cores = f"{cpu_seconds / seconds:.1f}" if seconds else "-"
    return f"{cpu_seconds:>8} {'x' + cores:>5}"


def print_times(results, stages):
    """The whole run's wall time and the slowest tests; every test's time
    to test_times.tsv."""
    ends = dict(line.rstrip("\n").split("\t") for line in open(os.path.join(results, "run.tsv"))) \
        if os.path.exists(os.path.join(results, "run.tsv")) else {}
    if "start" in ends and "end" in ends:
        print(f"{'whole run':<14} {'':<7} {'':>32} {minutes(int(ends['end']) - int(ends['start']))}")
    timed = sorted(((t, s.name, test) for s in stages for t, test in s.times), reverse=True)
    with open(os.path.join(results, "test_times.tsv"), "w") as f:
        f.write("seconds\tstage\ttest\n")
        for t, stage, test in timed:
            f.write(f"{t:.2f}\t{stage}\t{test}\n")
    if timed:
        print(f"slowest {min(SLOWEST_SHOWN, len(timed))} tests (all {len(timed)} in {results}/test_times.tsv):")
        for t, stage, test in timed[:SLOWEST_SHOWN]:
            print(f"  {t:8.1f} s  [{stage}] {test[:110]}")


def main():
    results = sys.argv[1]
    stages = load(results)
    print("\n======== test summary ========")
    print(f"{'stage':<14} {'result':<7} {'passed':>7} {'failed':>7} {'skipped':>8} {'time':>8} {'cpu-s  cores':>14}")
    for s in stages:
        print(f"{s.name:<14} {'ok' if s.ok else 'FAILED':<7} {s.passed:>7} {s.failed:>7} {len(s.skips):>8} "
              f"{minutes(s.seconds)} {cpu_column(s.cpu_seconds, s.seconds)}".rstrip())
    print_times(results, stages)
    for s in stages:
        for test, reason in s.skips:
            print(f"skipped  [{s.name}] {test}: {reason or '(no reason given)'}")
    for s in stages:
        for test in s.failures:
            print(f"FAILED   [{s.name}] {test}")
        if s.status != 0 and not s.failures:
            print(f"FAILED   [{s.name}] the stage exited with status {s.status} (see {results}/{s.name}/log.txt)")
        if s.ok is False and s.status == 0 and not s.failures:
            print(f"FAILED   [{s.name}] skipped for a missing dependency in strict mode")
    # A stage that failed without a failing test (a build error, a strict
    # skip) counts as one failure, so the closing line never reads "0 failed"
    # for a red run.
    failed = sum(s.failed or (0 if s.ok else 1) for s in stages)
    total = Counts(sum(s.passed for s in stages), failed, sum(len(s.skips) for s in stages))
    bad = [s.name for s in stages if not s.ok]
    print(f"stages failed: {', '.join(bad)}" if bad else "every stage passed")
    print(f"summary: {total.passed} passed, {total.failed} failed, {total.skipped} skipped")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
