"""The operator's guide stays usable: in README.md and docs/**/*.md, parsed as CommonMark (+ tables)
by markdown-it-py, every relative link and image resolves to a file or folder of the checkout (and a
`#fragment` to a heading of the target page, by GitHub's anchor rule), and every `make <target>` and
`python -m <module>` in a code block or code span names a Makefile target and a module that exist."""

from __future__ import annotations

import importlib.util
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parents[3]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
MD = MarkdownIt("commonmark").enable("table")

# `make [VAR=value ...] target`, after a line start, a shell separator or a VAR=value prefix.
MAKE = re.compile(r"(?:^|[\s;&|(`])make((?:\s+[A-Za-z_][A-Za-z0-9_]*=\S*)*)\s+([A-Za-z0-9][A-Za-z0-9_.-]*)")
PYTHON_M = re.compile(r"(?:^|[\s/;&|(`])python3?(?:\s+-[A-Za-z]+)*\s+-m\s+([A-Za-z_][\w.]*)")
MAKE_SPAN = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:flock\s+\S+\s+)?make\s")
RULE = re.compile(r"^([A-Za-z0-9_.-]+(?:[ \t]+[A-Za-z0-9_.-]+)*)[ \t]*::?(?!=)", re.M)


@dataclass(frozen=True)
class Ref:
    page: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _tokens(page: Path) -> Iterator[tuple[Token, int]]:
    """Every token of the page with its 1-based source line (inline children take their block's)."""
    for tok in MD.parse(page.read_text()):
        line = tok.map[0] + 1 if tok.map else 0
        yield tok, line
        for child in tok.children or []:
            yield child, line


def _plain(inline: Token) -> str:
    return "".join(c.content for c in inline.children or [] if c.type in ("text", "code_inline"))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The page's heading anchors; a repeated heading's are `<slug>-1`, `<slug>-2`, ... as GitHub's."""
    count: dict[str, int] = {}
    found: set[str] = set()
    toks = MD.parse(page.read_text())
    for tok, nxt in itertools.pairwise(toks):
        if tok.type == "heading_open":
            base = slug(_plain(nxt))
            n = count.get(base, 0)
            count[base] = n + 1
            found.add(f"{base}-{n}" if n else base)
    return found


def links(page: Path) -> Iterator[Ref]:
    for tok, line in _tokens(page):
        target = tok.attrs.get("href") if tok.type == "link_open" else None
        if tok.type == "image":
            target = tok.attrs.get("src")
        if isinstance(target, str):
            yield Ref(page, line, target)


def commands(page: Path, spans: re.Pattern[str] | None = None) -> Iterator[Ref]:
    """The lines of fenced and indented code blocks, and the code spans (only those `spans` matches,
    if given: `make` also names a Debian package in a list of words)."""
    for tok, line in _tokens(page):
        if tok.type in ("fence", "code_block"):
            for i, text in enumerate(tok.content.splitlines()):
                yield Ref(page, line + 1 + i, text)
        elif tok.type == "code_inline" and (spans is None or spans.match(tok.content)):
            yield Ref(page, line, tok.content)


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return {t for m in RULE.finditer(text) for t in m.group(1).split() if not t.startswith(".")}


def module_exists(name: str) -> bool:
    """A module of the checkout as a file (a package needs __main__.py to run with -m), else an
    installed one."""
    parts = name.split(".")
    if (ROOT / parts[0]).is_dir() or (ROOT / f"{parts[0]}.py").is_file():
        path = ROOT.joinpath(*parts)
        return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()
    return importlib.util.find_spec(name) is not None


def broken_link(ref: Ref) -> str | None:
    """Why the link does not resolve, or None."""
    url = urlsplit(ref.text)
    if url.scheme or url.netloc:
        return None  # an external address: not checked here
    path = unquote(url.path)
    target = (ref.page.parent / path).resolve() if path else ref.page
    if not target.is_relative_to(ROOT):
        return f"{ref.where()}: {ref.text} leaves the checkout"
    if not target.exists():
        return f"{ref.where()}: {ref.text}: no {target.relative_to(ROOT)}"
    if url.fragment and target.suffix == ".md" and unquote(url.fragment) not in anchors(target):
        return f"{ref.where()}: {ref.text}: no heading #{url.fragment} in {target.relative_to(ROOT)}"
    return None


def test_the_readme_is_a_newcomers_page() -> None:
    """A few screens (issue 29): the rest belongs in docs/, which the README maps."""
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 250, f"README.md has {lines} lines: move the detail into a page of docs/"
    assert ROOT / "docs" / "install-k3s.md" in PAGES and len(PAGES) > 10, PAGES


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    bad = [why for ref in links(page) if (why := broken_link(ref))]
    assert bad == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_make_target_in_code_exists(page: Path) -> None:
    targets = makefile_targets()
    named = [(ref, m.group(2)) for ref in commands(page, MAKE_SPAN) for m in MAKE.finditer(ref.text)]
    assert [f"{ref.where()}: make {t}" for ref, t in named if t not in targets] == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_module_in_code_exists(page: Path) -> None:
    named = [(ref, m.group(1)) for ref in commands(page) for m in PYTHON_M.finditer(ref.text)]
    assert [f"{ref.where()}: python -m {mod}" for ref, mod in named if not module_exists(mod)] == []


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    """Each check refuses a made-up page's broken link, anchor, target and module."""
    page = ROOT / "docs" / "made-up.md"  # never written: only its directory is used to resolve
    assert broken_link(Ref(page, 1, "no-such-page.md"))
    assert broken_link(Ref(page, 1, "security.md#no-such-heading"))
    assert broken_link(Ref(page, 1, "../../outside.md"))
    assert broken_link(Ref(page, 1, "security.md#the-platform-guard")) is None
    assert broken_link(Ref(page, 1, "https://example.com/x.md")) is None
    assert "no-such-target" not in makefile_targets() and {"sandbox", "test", "boot"} <= makefile_targets()
    assert [m.group(2) for m in MAKE.finditer("CLUSTER_PREFIX=x make bench BENCH=cluster; make test")] == [
        "bench",
        "test",
    ]
    assert not MAKE_SPAN.match("gcc make libc6-dev")
    assert MAKE_SPAN.match("K8SHOST_X=1 flock /l make bench")
    assert not module_exists("nodeenv.no_such_module") and module_exists("nodeenv.kubelet")
    assert [m.group(1) for m in PYTHON_M.finditer("x $(.venv/bin/python -m nodeenv.image env)")] == [
        "nodeenv.image"
    ]
    assert slug("The overlay (the kubelet-like runner)") == "the-overlay-the-kubelet-like-runner"
    assert slug("Workload status, rollouts and kubectl top") == "workload-status-rollouts-and-kubectl-top"
