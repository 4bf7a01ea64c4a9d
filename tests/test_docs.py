"""The documentation holds together: a short front page, and every document or link it or the code names exists.

(a) README.md stays a front door (<= 300 lines) and keeps the two set-up commands CI relies on;
(b) every Markdown document named in a source file (jaxinit/, theory/, experiments/, tests/) or in
    README.md / docs/*.md exists in the repository, and the developers' background notes outside it are
    never named;
(c) every relative link and image in README.md and docs/*.md resolves to a file in the repository, and a
    `#fragment` to a heading (or an explicit anchor) of that file.
Pure text checks: no jax, no package import.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
SOURCE_DIRS = ("jaxinit", "theory", "experiments", "tests")
README_MAX_LINES = 300
# Notes kept outside the repository for the developers; the project's own pages replace them, so no file may
# name them (built from parts so that this file does not name them either).
OUTSIDE_NOTES = tuple(stem + ".md" for stem in ("THEORY", "DESIGN", "MEASURED", "STYLE"))
# Files a run writes into its own directory that end in .md: outputs, not documents.
RUN_OUTPUT_FILES = {"table.md"}
MD = ".md"   # to spell made-up names in the self-checks without naming them

# A name or path ending in .md: a page under docs/, README.md, or a path anywhere (an absolute one never resolves).
DOC_NAME = re.compile(r"(?<![\w.~/-])(/?(?:[\w.~-]+/)*[\w.-]+\.md)(?![\w-])")
# Inline links and images: [text](target) / ![alt](target "title").
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def source_files() -> list[Path]:
    return sorted(p for d in SOURCE_DIRS for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def inside_repo(path: Path) -> bool:
    try:
        path.resolve().relative_to(ROOT)
    except ValueError:
        return False
    return True


def resolve_doc(name: str, where: Path) -> Path | None:
    """The file a document name in ``where`` refers to: relative to the repository root, to the naming file's
    folder or to docs/ (absolute paths never count: they are outside the repository)."""
    if name.startswith(("/", "~")):
        return None
    for base in (ROOT, where.parent, DOCS):
        candidate = base / name
        if candidate.is_file() and inside_repo(candidate):
            return candidate
    return None


def named_documents(path: Path) -> list[tuple[int, str]]:
    """(line number, name) of every .md name in a file, run outputs left out."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for match in DOC_NAME.finditer(line):
            name = match.group(1)
            if name.rsplit("/", 1)[-1] not in RUN_OUTPUT_FILES:
                found.append((number, name))
    return found


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text (code spans and link targets dropped, emphasis marks
    removed) lower-cased, characters other than letters, digits, '_', '-' and spaces removed, spaces -> '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("**", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a Markdown file: heading slugs (repeats numbered -1, -2, ... as GitHub does) and
    explicit <a id=...> anchors."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set(HTML_ANCHOR.findall(text))
    for heading in HEADING.findall(text):
        slug = github_slug(heading)
        n = seen.get(slug, 0)
        out.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    return out


def links(path: Path) -> list[str]:
    """Link and image targets of a Markdown file, outside fenced code blocks and code spans."""
    text = CODE_SPAN.sub("code", FENCE.sub("", path.read_text(encoding="utf-8")))
    return LINK.findall(text)


# --------------------------------------------------------------------------- (a) the front door
def test_readme_is_a_front_door():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES}); " \
                                           f"move detail to a page in docs/"


def test_readme_keeps_the_two_setup_commands():
    """`make demo` and `make test` are the set-up the README promises and CI runs (`.ci/run`)."""
    text = README.read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("demo", "test"):
        assert f"make {target}" in text, f"README.md no longer shows `make {target}`"
        assert re.search(rf"^{target}:", makefile, re.M), f"the Makefile has no `{target}` target"
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- (b) named documents exist
@pytest.mark.parametrize("path", source_files() + markdown_files(), ids=rel)
def test_named_documents_exist(path):
    missing = [f"line {n}: {name}" for n, name in named_documents(path) if resolve_doc(name, path) is None]
    assert not missing, f"{rel(path)} names documents that are not in the repository: {'; '.join(missing)}"


@pytest.mark.parametrize("path", source_files() + markdown_files(), ids=rel)
def test_outside_notes_are_never_named(path):
    text = path.read_text(encoding="utf-8")
    named = [n for n in OUTSIDE_NOTES if re.search(rf"(?<![\w-]){re.escape(n)}", text)]
    assert not named, f"{rel(path)} names {', '.join(named)}, which is not part of the project: cite docs/ instead"


def test_every_page_the_code_cites_is_checked():
    """The checks above see the citations: docs/theory.md is named by the theory code and resolves."""
    cited = {name for p in source_files() for _, name in named_documents(p)}
    assert "docs/theory.md" in cited and "docs/design.md" in cited
    assert resolve_doc("docs/theory.md", ROOT / "theory" / "meanfield.py") == DOCS / "theory.md"
    assert resolve_doc(f"/tmp/anywhere{MD}", README) is None
    assert resolve_doc(f"docs/no_such_page{MD}", README) is None


# --------------------------------------------------------------------------- (c) links and images resolve
@pytest.mark.parametrize("path", markdown_files(), ids=rel)
def test_relative_links_and_images_resolve(path):
    broken = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):       # http:, https:, mailto:
            continue
        file_part, _, fragment = target.partition("#")
        dest = path if not file_part else (path.parent / file_part)
        if not inside_repo(dest) or not dest.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target} (no heading '{fragment}' in {rel(dest)})")
    assert not broken, f"{rel(path)}: broken links: {'; '.join(broken)}"


def test_link_checker_sees_what_github_sees():
    """The slugs and link parsing the checks rely on, on known cases."""
    assert github_slug("5. Initial Guessing Bias, the MF-IGB link, and the phases") == \
        "5-initial-guessing-bias-the-mf-igb-link-and-the-phases"
    assert github_slug("Every setting (preset `cpu_full`)") == "every-setting-preset-cpu_full"
    assert github_slug("The paper's architecture family") == "the-papers-architecture-family"
    assert "1-conventions" in anchors(DOCS / "theory.md")
    sample = f"see [a](docs/x{MD}#y) and ![b](docs/p.png) but not `[c](nowhere{MD})` or\n```\n[d](e{MD})\n```\n"
    text = CODE_SPAN.sub("code", FENCE.sub("", sample))
    assert LINK.findall(text) == [f"docs/x{MD}#y", "docs/p.png"]
