"""Chat-template conformance: `tokenmill template` against Python jinja2
rendering like Hugging Face transformers' apply_chat_template
(chat_template_oracle.py), on every template of tests/data/chat_templates/
(llama.cpp's collection of published model templates) with every
conversation of tests/data/chat_template_conversations.json.

A case agrees when both render and the bytes are identical, or when jinja2
fails (a compile error, raise_exception, any runtime error) and tokenmill
exits non-zero (with a message, without a crash). At least 95 % of all cases
must agree, and every jinja2 error must be an error in tokenmill; the
summary table and the first differing position of each differing case are
printed (pytest -s); with TOKENMILL_ARTIFACTS set (ctest sets it) the whole
expected and actual texts of each disagreement are written there."""
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import SANITIZER_MARKERS, require_module

require_module("jinja2", "Jinja2", "the chat template oracle")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chat_template_oracle as oracle  # noqa: E402

MIN_AGREEING_SHARE = 0.95
WORKERS = 4
CONTEXT = 40  # characters shown each side of the first difference


def test_every_template_is_covered():
    """Each .jinja file is rendered with each conversation, and the oracle
    answers for every case (a rendering or an expected error)."""
    files = sorted(f for f in os.listdir(oracle.TEMPLATES_DIR) if f.endswith(".jinja"))
    assert files, f"no templates in {oracle.TEMPLATES_DIR}"
    assert os.path.exists(os.path.join(oracle.TEMPLATES_DIR, "ORIGIN.md"))
    convs = oracle.conversations()
    names = [c["name"] for c in convs]
    assert len(set(names)) == len(names), "conversation names must be unique"
    cases = list(oracle.cases())
    covered = {}
    for path, conv in cases:
        covered.setdefault(os.path.basename(path), set()).add(conv["name"])
    assert sorted(covered) == files
    assert all(covered[f] == set(names) for f in files)
    results = [oracle.render_expected(case) for case in cases]
    assert all(status in ("ok", "error") for status, _ in results)
    # An oracle that failed everywhere would make the comparison meaningless.
    assert sum(status == "ok" for status, _ in results) >= 0.8 * len(cases)


@pytest.fixture(scope="module")
def template_bin(tokenmill_bin):
    proc = subprocess.run([tokenmill_bin, "template", "--help"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 or "--chat-template-file" not in proc.stdout + proc.stderr:
        pytest.skip(f"{tokenmill_bin} has no `template` command (no Jinja chat template engine in this "
                    f"build): `template --help` exited {proc.returncode}")
    return tokenmill_bin


def _conversation_files(tmp_dir, conv):
    """The messages (and tools) files of a conversation, written once."""
    messages = os.path.join(tmp_dir, f"{conv['name']}.messages.json")
    tools = os.path.join(tmp_dir, f"{conv['name']}.tools.json") if "tools" in conv else None
    if not os.path.exists(messages):
        with open(messages, "w", encoding="utf-8") as f:
            json.dump(conv["messages"], f, ensure_ascii=False)
        if tools:
            with open(tools, "w", encoding="utf-8") as f:
                json.dump(conv["tools"], f, ensure_ascii=False)
    return messages, tools


def _command(binary, case, files):
    path, conv = case
    messages, tools = files
    bos, eos = oracle.special_tokens(path)
    cmd = [binary, "template", "--chat-template-file", path, "--messages-file", messages,
           "--bos-token", bos, "--eos-token", eos]
    if tools:
        cmd += ["--tools-file", tools]
    if not conv.get("add_generation_prompt", True):
        cmd.append("--no-generation-prompt")
    if conv.get("kwargs"):
        cmd += ["--chat-template-kwargs", json.dumps(conv["kwargs"])]
    return cmd


def first_difference(expected, actual):
    """'at N: expected ... / actual ...' with CONTEXT characters either side."""
    n = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), min(len(expected), len(actual)))
    lo = max(0, n - CONTEXT)
    return (f"at {n} (lengths {len(expected)} expected, {len(actual)} actual)\n"
            f"      expected: {expected[lo:n + CONTEXT]!r}\n"
            f"      actual:   {actual[lo:n + CONTEXT]!r}")


def _judge(expected, proc):
    """(verdict, detail): identical, error-matched, differing, unexpected-error,
    missed-error or crashed."""
    status, want = expected
    stderr = proc.stderr.decode("utf-8", "replace")
    if proc.returncode < 0 or any(m in stderr for m in SANITIZER_MARKERS):
        return "crashed", f"exit {proc.returncode}: {stderr[-400:]}"
    if status == "error":
        if proc.returncode != 0:
            return "error-matched", ""
        return "missed-error", f"jinja2: {want[:200]}; tokenmill rendered {len(proc.stdout)} bytes"
    if proc.returncode != 0:
        return "unexpected-error", f"exit {proc.returncode}: {stderr.strip()[-300:]}"
    try:
        actual = proc.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        return "differing", f"output is not UTF-8: {exc}"
    if actual == want:
        return "identical", ""
    return "differing", first_difference(want, actual)


def test_conformance(template_bin, tmp_path_factory):
    tmp_dir = str(tmp_path_factory.mktemp("chat_template_conversations"))
    cases = list(oracle.cases())
    expected = [oracle.render_expected(case) for case in cases]
    files = [_conversation_files(tmp_dir, conv) for _, conv in cases]

    artifacts = os.environ.get("TOKENMILL_ARTIFACTS")

    def run(i):
        try:
            proc = subprocess.run(_command(template_bin, cases[i], files[i]), capture_output=True, timeout=60)
        except subprocess.TimeoutExpired:
            return "crashed", "no answer in 60 s"
        verdict = _judge(expected[i], proc)
        if artifacts and verdict[0] in ("differing", "unexpected-error", "missed-error"):
            # The whole texts of a disagreement, for a diff tool.
            os.makedirs(artifacts, exist_ok=True)
            stem = os.path.join(artifacts, oracle.case_id(cases[i]).replace("::", "."))
            with open(stem + ".expected.txt", "w", encoding="utf-8") as f:
                f.write(expected[i][1])
            with open(stem + ".actual.txt", "wb") as f:
                f.write(proc.stdout + proc.stderr)
        return verdict

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        verdicts = list(pool.map(run, range(len(cases))))

    counts = {}
    for verdict, _ in verdicts:
        counts[verdict] = counts.get(verdict, 0) + 1
    total = len(cases)
    renders = sum(status == "ok" for status, _ in expected)
    agreeing = counts.get("identical", 0) + counts.get("error-matched", 0)
    print(f"\nchat template conformance: {len(oracle.template_paths())} templates x "
          f"{len(oracle.conversations())} conversations")
    print(f"  {'total cases':<42}{total:>5}")
    print(f"  {'identical (of ' + str(renders) + ' jinja2 renderings)':<42}{counts.get('identical', 0):>5}")
    print(f"  {'differing':<42}{counts.get('differing', 0):>5}")
    print(f"  {'tokenmill error, jinja2 rendered':<42}{counts.get('unexpected-error', 0):>5}")
    print(f"  {'expected errors matched':<42}{counts.get('error-matched', 0):>5} of {total - renders}")
    print(f"  {'expected errors missed':<42}{counts.get('missed-error', 0):>5}")
    print(f"  {'crashed':<42}{counts.get('crashed', 0):>5}")
    print(f"  {'agreeing share':<42}{agreeing / total:>8.1%}")
    bad = [(oracle.case_id(c), v, d) for c, (v, d) in zip(cases, verdicts)
           if v not in ("identical", "error-matched")]
    for cid, verdict, detail in bad:
        print(f"  {verdict:<16} {cid}: {detail}")

    missed = [cid for cid, v, _ in bad if v == "missed-error"]
    crashed = [cid for cid, v, _ in bad if v == "crashed"]
    assert not crashed, f"tokenmill crashed on {len(crashed)} cases: {crashed[:10]}"
    assert not missed, f"{len(missed)} jinja2 errors rendered by tokenmill: {missed[:10]}"
    assert agreeing / total >= MIN_AGREEING_SHARE, (
        f"only {agreeing}/{total} cases agree ({agreeing / total:.1%} < {MIN_AGREEING_SHARE:.0%}); "
        f"first: {[cid for cid, _, _ in bad[:10]]}")
