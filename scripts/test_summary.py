#!/usr/bin/env python3
"""Prints one summary of a scripts/test_all.sh run and exits non-zero if any
stage failed.

Reads RESULTS/stages.tsv (stage, exit status, seconds) and each stage's
JUnit files: ctest's (ctest.xml), pytest's (one per suite, named after the
ctest test that ran it, so a pytest suite counts its own tests instead of
one ctest entry) and GoogleTest's (*_test.xml). Fuzz stages are read from
their log. Every skip is listed with its reason; in strict mode (CI=true or
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


class Stage:
    def __init__(self, name, status, seconds):
        self.name, self.status, self.seconds = name, status, seconds
        self.passed = self.failed = 0
        self.skips = []     # (test, reason)
        self.failures = []  # test names

    def add(self, test, outcome, reason=""):
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


def junit_cases(path):
    """(name, outcome, reason) for each testcase of a pytest or gtest JUnit file."""
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        name = ".".join(p for p in (case.get("classname"), case.get("name")) if p)
        skipped = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None:
            yield name, "failed", ""
        elif skipped is not None or case.get("result") == "skipped" or case.get("status") == "notrun":
            reason = skipped.get("message", "") if skipped is not None else ""
            yield name, "skipped", first_line(reason) or first_line(skipped.text if skipped is not None else "")
        else:
            yield name, "passed", ""


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
            for test, outcome, reason in junit_cases(pytest_xml):
                stage.add(f"{name}::{test}", outcome, reason)
            if status == "fail" and stage.failed == before:  # crashed or timed out outside a test
                stage.add(name + " (suite)", "failed")
        elif status == "run":
            stage.add(name, "passed")
        elif status in ("notrun", "disabled"):
            stage.add(name, "skipped", gtest_skip_reason(out))
        else:
            stage.add(name, "failed")


def read_gtest_files(stage, directory):
    for file in sorted(os.listdir(directory)):
        if file.endswith("_test.xml"):
            for test, outcome, reason in junit_cases(os.path.join(directory, file)):
                stage.add(f"{file[:-4]}: {test}", outcome, reason)


def read_fuzz_log(stage, directory):
    log = open(os.path.join(directory, "log.txt"), errors="replace").read()
    for target in re.findall(r"^fuzz-smoke: (\S+) for \d+s$", log, re.M):
        stage.add(target, "failed" if f"fuzz-smoke: {target} FAILED" in log else "passed")


def load(results):
    stages = []
    with open(os.path.join(results, "stages.tsv")) as f:
        for line in f:
            name, status, seconds = line.rstrip("\n").split("\t")
            stage = Stage(name, int(status), int(seconds))
            directory = os.path.join(results, name)
            read_ctest(stage, directory)
            read_gtest_files(stage, directory)
            if name == "fuzz":
                read_fuzz_log(stage, directory)
            stages.append(stage)
    return stages


def main():
    results = sys.argv[1]
    stages = load(results)
    print("\n======== test summary ========")
    print(f"{'stage':<14} {'result':<7} {'passed':>7} {'failed':>7} {'skipped':>8} {'time':>8}")
    for s in stages:
        minutes, seconds = divmod(s.seconds, 60)
        print(f"{s.name:<14} {'ok' if s.ok else 'FAILED':<7} {s.passed:>7} {s.failed:>7} {len(s.skips):>8} "
              f"{minutes:>4}m{seconds:02d}s")
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
