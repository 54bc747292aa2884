"""scripts/check_architecture_doc.py: the names docs/architecture.md uses
must exist in the tree, so the page cannot drift from the code unnoticed."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_architecture_doc.py"


def run(doc, root):
    return subprocess.run([sys.executable, str(SCRIPT), str(doc), "--root", str(root)], capture_output=True, text=True)


def small_tree(tmp_path):
    (tmp_path / "src" / "engine").mkdir(parents=True)
    (tmp_path / "src" / "engine" / "core.h").write_text(
        "namespace tm::engine {\nclass EngineCore {\n public:\n  bool step();\n  // mentions ghost()\n};\n}\n")
    (tmp_path / "src" / "engine" / "core.cc").write_text("bool EngineCore::step() { return true; }\n")
    return tmp_path


def test_names_that_exist_pass(tmp_path):
    root = small_tree(tmp_path)
    doc = root / "doc.md"
    doc.write_text("`engine/core.h` and `src/engine/` run `EngineCore::step()`; `engine::EngineCore` too.\n")
    r = run(doc, root)
    assert r.returncode == 0, r.stderr


def test_a_renamed_file_and_member_are_named(tmp_path):
    root = small_tree(tmp_path)
    doc = root / "doc.md"
    doc.write_text("line one\n`engine/old_core.cc` calls `EngineCore::ghost` and `EngineCore::step`.\n")
    r = run(doc, root)
    assert r.returncode == 1
    assert "line 2: `engine/old_core.cc` is not a file" in r.stderr
    # Named only in a comment: not declared.
    assert "`EngineCore::ghost` is declared nowhere" in r.stderr
    assert "EngineCore::step`" not in r.stderr


def test_the_real_page_matches_the_code():
    r = run(ROOT / "docs" / "architecture.md", ROOT)
    assert r.returncode == 0, r.stderr
