"""What git keeps of the reports, as a fresh clone has it: each main report's summary.json,
index.html and headline figures, within a size budget; the full reports are DVC outputs, not
git's; and no tracked report page links to a file that git does not track (a reader of a fresh
clone would find it broken). Markdown links: tests/test_markdown_links.py."""

from __future__ import annotations

import posixpath
import re
import subprocess
import urllib.parse
from html.parser import HTMLParser

import yaml

from tests.conftest import REPO_ROOT

# Tracked reports/ may not grow past this: 5 MiB since issue 59, 6 MB since issue 73, whose full
# reports' summaries and pages are to be tracked too (their per-estimator figures stay in DVC).
# Apparent bytes of the working-tree files git tracks.
REPORTS_BUDGET_BYTES = 6_000_000


def _tracked(*paths: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--", *paths], cwd=REPO_ROOT, capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


class _Links(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href") and value is not None:
                self.links.append(value)
            elif name == "id" and value:
                self.ids.add(value)


def _resolve(page: str, link: str) -> str | None:
    """The repository path a relative link on ``page`` names (None: an anchor on the page itself)."""
    parts = urllib.parse.urlsplit(link)
    assert not parts.scheme and not parts.netloc, f"{page}: link {link!r} leaves the repository"
    if not parts.path:
        return None
    # a browser percent-decodes the path before it looks for the file
    return posixpath.normpath(posixpath.join(posixpath.dirname(page), urllib.parse.unquote(parts.path)))


def test_every_link_of_every_tracked_report_page_is_a_tracked_file():
    tracked = _tracked()
    known = set(tracked)
    pages = [p for p in tracked if re.fullmatch(r"reports/[^/]+/index\.html", p)]
    assert pages, "no report page tracked under reports/"
    for page in pages:
        html = _Links()
        html.feed((REPO_ROOT / page).read_text(encoding="utf-8"))
        assert html.links, f"{page}: no links at all (not a report page?)"
        for link in html.links:
            target = _resolve(page, link)
            if target is None:  # an anchor: the page must have it
                assert urllib.parse.urlsplit(link).fragment in html.ids, f"{page}: {link!r} names no element on the page"
            else:
                assert target in known, f"{page} links {link!r} ({target}), which git does not track"


def test_every_figure_of_a_tracked_report_is_linked_by_its_page():
    """A figure no page shows is only weight in the budget (e.g. left from a build with every
    estimator's figures)."""
    linked = set()
    for page in [p for p in _tracked("reports") if p.endswith("/index.html")]:
        html = _Links()
        html.feed((REPO_ROOT / page).read_text(encoding="utf-8"))
        linked |= {t for link in html.links if (t := _resolve(page, link))}
    unlinked = [p for p in _tracked("reports") if p.endswith(".png") and p not in linked]
    assert unlinked == [], "tracked figures no report page links"


def test_tracked_reports_stay_within_the_budget():
    tracked = _tracked("reports")
    missing = [p for p in tracked if not (REPO_ROOT / p).is_file()]
    assert missing == [], "tracked report files missing from the working tree"
    sizes = {p: (REPO_ROOT / p).stat().st_size for p in tracked}
    total = sum(sizes.values())
    largest = sorted(sizes, key=sizes.get, reverse=True)[:5]
    assert total <= REPORTS_BUDGET_BYTES, (
        f"tracked reports/ is {total / 1e6:.2f} MB, over the {REPORTS_BUDGET_BYTES / 1e6:.0f} MB budget; "
        f"largest: {[(p, sizes[p]) for p in largest]}")


def test_the_full_reports_are_dvc_outputs_and_not_in_git():
    stages = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())["stages"]
    (full_out,) = stages["report_full"]["do"]["outs"]
    ((path, opts),) = full_out.items()
    assert path.endswith("_full") and opts.get("cache", True) is True, full_out
    (main_out,) = stages["report"]["do"]["outs"]
    assert next(iter(main_out.values())).get("cache") is False  # the main report is git's
    full = [p for p in _tracked("reports") if re.match(r"reports/[^/]+_full/", p)]
    assert full == [], "full reports tracked by git"
    ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", "reports/any-benchmark_full/index.html"],
                             cwd=REPO_ROOT)
    assert ignored.returncode == 0, "git does not ignore reports/<benchmark>_full/"
