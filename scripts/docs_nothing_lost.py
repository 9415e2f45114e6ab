"""Check that splitting the README into docs/ lost nothing: every sentence of an old README (from git)
must still be found, normalized, in README.md or docs/**/*.md of the working tree.

Normalized = Markdown's link targets, emphasis, code and table markers dropped, lower case, every run
of non-alphanumerics one space; so a heading made of a bold lead, a quoted section name made a link,
or a table re-wrapped still count as kept. A sentence is cut at '. ', '; ', ': ' and at line ends in
tables and code blocks. Prints what is missing, each with its old line, and a count; exits 1 if any
is missing.

    .venv/bin/python scripts/docs_nothing_lost.py --old main      (env DOCS_OLD_REV)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
PIECE = re.compile(r"(?<=[.;:])\s+|\n(?=\s*[|`-])|\n\n+")


def normalize(text: str) -> str:
    text = LINK.sub(r"\1", text)
    text = re.sub(r"README\b", " ", text)  # "README "Cluster mode"" became a link to the page
    return re.sub(r"[^0-9a-z]+", " ", text.lower()).strip()


def pieces(markdown: str) -> list[tuple[int, str]]:
    """(line, text) of every sentence or table/code line of the page."""
    out: list[tuple[int, str]] = []
    pos = 0
    for m in [*PIECE.finditer(markdown), None]:
        end = m.start() if m else len(markdown)
        text = markdown[pos:end]
        if normalize(text):
            out.append((markdown.count("\n", 0, pos) + 1, text.strip()))
        pos = m.end() if m else end
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--old",
        default=os.environ.get("DOCS_OLD_REV", "main"),
        help="git revision whose README.md is the old one (env DOCS_OLD_REV; default main)",
    )
    args = ap.parse_args(argv)
    old = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{args.old}:README.md"], check=True, capture_output=True, text=True
    ).stdout
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    corpus = " " + " ".join(normalize(p.read_text()) for p in pages) + " "
    old_pieces = pieces(old)
    missing = [(line, text) for line, text in old_pieces if f" {normalize(text)} " not in corpus]
    for line, text in missing:
        print(f"README.md@{args.old}:{line}: {text}")
    print(f"{len(old_pieces) - len(missing)} of {len(old_pieces)} sentences of README.md@{args.old} kept")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
