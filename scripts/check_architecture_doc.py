#!/usr/bin/env python3
"""Checks that docs/architecture.md names only things that exist.

Every `code span` of the page that looks like a path (`server/api_rooms.cc`,
`src/http/`, `scripts/test_all.sh`) must be a file or folder of the tree
(paths under src/ may leave out the "src/" prefix), and every
`Class::member` (or `namespace::name`) must be declared: some source file
declares the class, struct or namespace and names the member, or spells
`Class::member` itself. Run by the format stage of scripts/test_all.sh, so
a rename that leaves the page behind fails `make test`.

Usage: check_architecture_doc.py [DOC] [--root DIR]   (exit 1 naming each stale name)
"""
import argparse
import pathlib
import re
import sys

SPAN = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"^[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]*)+$|^[A-Za-z0-9_\-]+\.(cc|h|py|sh|md|cmake|txt)$")
QUALIFIED = re.compile(r"^(?:[A-Za-z_]\w*::)+~?[A-Za-z_]\w*$")
SOURCE_SUFFIXES = {".h", ".cc"}


def strip_call(span):
    """`Foo::bar()` and `Foo::bar(x)` name Foo::bar."""
    return re.sub(r"\(.*\)$", "", span.strip())


def path_exists(root, span):
    text = span.rstrip("/").split(":")[0]
    if "*" in text or "{" in text or " " in text:
        return True  # a pattern or a command line, not one path
    if "/" not in text:  # a bare file name: anywhere in the tree
        return any(root.rglob(text))
    # From the root, from src/, or from a library folder (the kernels'
    # `avx2/avx2.h` in the row of src/kernels/).
    candidates = [root / text, root / "src" / text] + [lib / text for lib in (root / "src").iterdir()]
    return any(c.exists() for c in candidates)


COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.S)


def code_only(text):
    """The text without comments and string literals: a name a comment
    mentions is not declared by it."""
    return COMMENT_OR_STRING.sub(" ", text)


class SourceIndex:
    def __init__(self, root):
        self.files = []
        for folder in ("src", "tests", "fuzz", "benchmarks"):
            base = root / folder
            if base.is_dir():
                self.files += [code_only(p.read_text(errors="replace")) for p in sorted(base.rglob("*"))
                               if p.suffix in SOURCE_SUFFIXES]
        self.everything = "\n".join(self.files)

    def declares(self, qualified):
        parts = qualified.split("::")
        owner, member = parts[-2], parts[-1].lstrip("~")
        if re.search(r"\b" + re.escape(owner) + r"::~?" + re.escape(member) + r"\b", self.everything):
            return True
        owner_decl = re.compile(r"\b(class|struct|namespace|enum class|enum)\s+(\w+::)*" + re.escape(owner) + r"\b")
        member_word = re.compile(r"\b" + re.escape(member) + r"\b")
        return any(owner_decl.search(text) and member_word.search(text) for text in self.files)


def stale_names(doc_text, root):
    index = SourceIndex(root)
    problems = []
    for lineno, line in enumerate(doc_text.splitlines(), 1):
        for span in SPAN.findall(line):
            name = strip_call(span)
            if QUALIFIED.match(name):
                if name.split("::")[0] in ("std", "nlohmann", "httplib"):
                    continue
                if not index.declares(name):
                    problems.append(f"line {lineno}: `{span}` is declared nowhere in the sources")
            elif PATH.match(name) and not name.startswith(("http://", "https://", ".")):
                if not path_exists(root, name):
                    problems.append(f"line {lineno}: `{span}` is not a file or folder of the tree")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = pathlib.Path(__file__).resolve().parent.parent
    parser.add_argument("doc", nargs="?", default=str(here / "docs" / "architecture.md"))
    parser.add_argument("--root", default=str(here))
    args = parser.parse_args()
    root = pathlib.Path(args.root)
    problems = stale_names(pathlib.Path(args.doc).read_text(), root)
    for p in problems:
        print(f"{args.doc}: {p}", file=sys.stderr)
    if problems:
        print(f"{len(problems)} name(s) in {args.doc} no longer match the code", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
