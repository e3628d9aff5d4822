"""What git keeps of the reports, as a fresh clone has it: each main report's summary.json,
index.html and headline figures, and airline's full summary.json and index.html,
within a size budget; the full reports' figures are DVC outputs, not git's; and no tracked report
page links to a file that git does not track (a reader of a fresh clone would find it broken),
except a full page's figures, which the page says are DVC outputs. Markdown links:
tests/test_markdown_links.py."""

from __future__ import annotations

import json
import posixpath
import re
import subprocess
import urllib.parse
from html.parser import HTMLParser

import yaml

from tests.conftest import REPO_ROOT

# Tracked reports/ may not grow past this: 5 MiB since issue 59, 6 MB since issue 73, whose full
# reports' summaries and pages are tracked too (their per-estimator figures stay in DVC); 6.5 MB
# since issue 71's two dev-only benchmarks of late ratings were first built (0.43 MB: their pages,
# summaries and four headline figures each, as every main report keeps).
# Apparent bytes of the working-tree files git tracks.
REPORTS_BUDGET_BYTES = 6_500_000

# the benchmarks whose full report's page and summary git keeps (.gitignore): every seed
# comparator beside ENIGMA (issue 73)
TRACKED_FULL = ("airline", "see2019")
FULL_FIGURES = re.compile(r"reports/[^/]+_full/figures/[^/]+")


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


def _ignored(path: str) -> bool:
    return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=REPO_ROOT).returncode == 0


def test_every_link_of_every_tracked_report_page_is_a_tracked_file():
    tracked = _tracked()
    known = set(tracked)
    pages = [p for p in tracked if re.fullmatch(r"reports/[^/]+/index\.html", p)]
    assert pages, "no report page tracked under reports/"
    for page in pages:
        html = _Links()
        text = (REPO_ROOT / page).read_text(encoding="utf-8")
        html.feed(text)
        assert html.links, f"{page}: no links at all (not a report page?)"
        for link in html.links:
            target = _resolve(page, link)
            if target is None:  # an anchor: the page must have it
                assert urllib.parse.urlsplit(link).fragment in html.ids, f"{page}: {link!r} names no element on the page"
            elif page.endswith("_full/index.html") and FULL_FIGURES.fullmatch(target):
                # a full page's figure: a DVC output (the test below), and the page says so
                assert target.startswith(posixpath.dirname(page) + "/"), f"{page} links another report's figure {link!r}"
                assert "DVC outputs" in text, f"{page} does not say its figures are DVC outputs"
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


def test_the_full_reports_figures_are_dvc_outputs_and_their_pages_and_summaries_are_gits():
    stages = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())["stages"]
    outs = {p: (o or {}) for out in stages["report_full"]["do"]["outs"] for p, o in out.items()}
    full = "${report.out_dir}/${key}_full"
    assert outs == {f"{full}/summary.json": {"cache": False}, f"{full}/index.html": {"cache": False},
                    f"{full}/figures": {"cache": True}}, outs
    (main_out,) = stages["report"]["do"]["outs"]
    assert next(iter(main_out.values())).get("cache") is False  # the main report is git's
    tracked = [p for p in _tracked("reports") if re.match(r"reports/[^/]+_full/", p)]
    expected = {f"reports/{b}_full/{f}" for b in TRACKED_FULL for f in ("summary.json", "index.html")}
    assert set(tracked) == expected, "the tracked full reports: airline's and See 2019's pages and summaries"
    for b in TRACKED_FULL:
        summary = json.loads((REPO_ROOT / f"reports/{b}_full/summary.json").read_text())
        assert summary["benchmark"] == b and len(summary["estimators"]) > len(
            json.loads((REPO_ROOT / f"reports/{b}/summary.json").read_text())["estimators"]), f"{b}: not a full report"
        # the comparators run on a sample of each agent's replies say so (issue 73: how it was sized)
        sized = {n: e["labels"].get("note", "") for n, e in summary["estimators"].items() if n.startswith(("perplexity", "bertscore"))}
        assert len(sized) == 2 and all(note.startswith("sized: ") for note in sized.values()), sized
    assert _ignored("reports/any-benchmark_full/index.html"), "git does not ignore another benchmark's full report"
    assert _ignored("reports/airline_full/figures/overview.png"), "git does not ignore a full report's figures"
    for b in TRACKED_FULL:
        assert not _ignored(f"reports/{b}_full/index.html"), f"git ignores {b}'s full page"
