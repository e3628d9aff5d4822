"""Every relative link in the repository's tracked Markdown resolves: to a tracked file or folder,
and, where it names an anchor (``file.md#heading``, ``#heading``), to a heading of that file.

Docs move (docs/ -> studies/docs/, benchmarks/ -> studies/), and a link that pointed at the old
place renders as a 404 on GitHub without anyone noticing; an anchor whose heading was retitled
lands at the top of the page instead of the section it cites. Absolute URLs are not fetched (the
tests run offline)."""

from __future__ import annotations

import re
import subprocess
from functools import lru_cache
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

import pytest

from tests.conftest import REPO_ROOT

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and ![alt](target); the target up to the first space or closing parenthesis
# (a title in quotes may follow it)
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)


def _git_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"not a git checkout ({out.stderr.strip()}): the tracked files are unknown")
    return [p for p in out.stdout.split("\0") if p]


@lru_cache(maxsize=1)
def _tracked() -> tuple[frozenset[str], frozenset[str]]:
    files = _git_files()
    folders = {str(parent) for f in files for parent in PurePosixPath(f).parents if str(parent) != "."}
    return frozenset(files), frozenset(folders)


def _prose_lines(text: str):
    """(line number, line) outside fenced code blocks, with code spans blanked out."""
    fenced = False
    for n, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text without Markdown (links keep their text, code its
    content), lower case, every character that is not a letter, digit, space, hyphen or
    underscore dropped, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_in(text: str) -> frozenset[str]:
    """The anchors a Markdown text defines: one per heading (a repeated one gets -1, -2, ...), and
    any explicit ``<a name=...>`` or ``<a id=...>``."""
    seen: dict[str, int] = {}
    out: set[str] = set(EXPLICIT_ANCHOR.findall(text))
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if m:
            base = slug(m.group(2))
            k = seen.get(base, 0)
            out.add(base if k == 0 else f"{base}-{k}")
            seen[base] = k + 1
    return frozenset(out)


@lru_cache(maxsize=None)
def anchors(path: str) -> frozenset[str]:
    return anchors_in((REPO_ROOT / path).read_text(encoding="utf-8"))


def links(text: str) -> list[tuple[int, str]]:
    found = []
    for n, line in _prose_lines(text):
        found += [(n, m.group(1)) for m in INLINE.finditer(line)]
        ref = REFERENCE.match(line)
        if ref:
            found.append((n, ref.group(1)))
    return found


def broken(path: str, text: str | None = None) -> list[str]:
    """What is wrong with the links of the tracked file ``path`` (its content ``text``, if given)."""
    files, folders = _tracked()
    if text is None:
        text = (REPO_ROOT / path).read_text(encoding="utf-8")
    here = PurePosixPath(path).parent
    out = []
    for n, target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("//"):
            continue  # http(s), mailto: not checked offline
        ref, _, anchor = target.partition("#")
        ref, anchor = unquote(ref), unquote(anchor)
        if ref.startswith("/"):
            resolved = ref.lstrip("/")
        else:
            parts: list[str] = []
            for part in (here / ref).parts if ref else here.parts:
                if part == "..":
                    if not parts:
                        parts = ["<outside>"]
                        break
                    parts.pop()
                elif part != ".":
                    parts.append(part)
            resolved = "/".join(parts)
        where = f"{path}:{n}: ({target})"
        if not ref:
            resolved = path
        if resolved.startswith("<outside>"):
            out.append(f"{where} leaves the repository")
        elif resolved.rstrip("/") in folders and not anchor:
            continue
        elif resolved not in files:
            out.append(f"{where} names {resolved}, which git does not track")
        elif anchor and resolved.endswith(".md") and anchor not in (anchors_in(text) if resolved == path else anchors(resolved)):
            out.append(f"{where} names the anchor #{anchor}, which no heading of {resolved} gives")
    return out


def test_slug_matches_github():
    assert slug("Whose earlier turns a target reply follows (`dice.target_history`; the default `source`)") == \
        "whose-earlier-turns-a-target-reply-follows-dicetarget_history-the-default-source"
    assert slug("See 2019: ENIGMA against SPE, rating by rating") == "see-2019-enigma-against-spe-rating-by-rating"
    assert slug("Issue 14's studied settings, in both full reports") == "issue-14s-studied-settings-in-both-full-reports"


def test_the_checker_finds_a_broken_link_and_a_missing_anchor():
    # the checker's own failure modes, on a text it must flag, so that a pass below means something
    text = ("# A heading\n\n[gone](no-such-file.md) [bad](#no-such-heading) [ok](#a-heading) [up](../README.md)\n"
            "[other file's heading](../README.md#no-such-readme-heading) [outside](../../x.md) [url](https://example.org)\n"
            "```\n[in code](not-checked.md)\n# not a heading\n```\n`[span](not-checked-either.md)`\n")
    problems = broken("docs/pipeline.md", text)  # a tracked file; its real text is not read
    assert [p.split(": (")[1].split(")")[0] for p in problems] == [
        "no-such-file.md", "#no-such-heading", "../README.md#no-such-readme-heading", "../../x.md"], problems
    assert "#not-a-heading" not in anchors_in(text)


def test_every_relative_link_in_tracked_markdown_resolves():
    files, _ = _tracked()
    docs = sorted(f for f in files if f.endswith(".md") and (REPO_ROOT / f).is_file())
    assert docs, "no tracked Markdown files"
    problems = [p for d in docs for p in broken(d)]
    assert not problems, f"{len(problems)} broken links in tracked Markdown:\n" + "\n".join(problems)
