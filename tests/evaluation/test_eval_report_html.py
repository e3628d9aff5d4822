"""The HTML report as a browser reads it: every image link finds its file, and text is escaped
exactly once (no literal markup, no double escapes). Built through ``enigma report build``, with
every estimator's figures (``--figures all``) and with the headline ones (the default)."""

from __future__ import annotations

import json
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from enigma.cli import app
from enigma.evaluation.errors import EvaluationError
from enigma.evaluation.report import slugs, write_report

runner = CliRunner()

# Names as the catalog spells them (brackets, colons) and worse: markup, an ampersand, a space,
# a fragment and query character, a percent sign, and two names that differ only in punctuation.
NAMES = ["spe:ridge[own-rollouts]", "a<b>&c #1?%20", "spe-ridge-own-rollouts", "constant"]


class _Page(HTMLParser):
    """The images, the in-page links and ids, the text a reader sees, and each flag cell's pieces
    of text and <br>s."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.images: list[str] = []
        self.anchors: list[str] = []
        self.ids: set[str] = set()
        self.text: list[str] = []
        self.flag_cells: list[list[str]] = []
        self._in_flag = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and "href" in a:
            self.anchors.append(a["href"])
        if tag == "img":
            self.images.append(a["src"])
        elif tag == "td" and "flag" in (a.get("class") or "").split():
            self._in_flag = True
            self.flag_cells.append([])
        elif tag == "br" and self._in_flag:
            self.flag_cells[-1].append("<br>")

    def handle_endtag(self, tag):
        if tag == "td":
            self._in_flag = False

    def handle_data(self, data):
        self.text.append(data)
        if self._in_flag and data:
            self.flag_cells[-1].append(data)


def _build(tmp_path: Path, *options: str) -> tuple[Path, dict]:
    rng = np.random.default_rng(0)
    truth, results, curves = [], [], []
    for i in range(8):
        for r in ("enjoy", "fluency"):
            t = 0.3 + 0.05 * i + (0.1 if r == "fluency" else 0.0)
            truth.append({"agent_id": f"a{i}", "rating": r, "value": t})
            for name in NAMES:
                # "constant" collapses on both ratings: two flags in one cell
                est = 0.5 if name == "constant" else t + rng.normal(0, 0.05)
                results.append({"estimator": name, "agent_id": f"a{i}", "rating": r, "estimate": est,
                                "regime": "replies-at-logged-states"})
        for step in (10, 20):
            curves.append({"estimator": "spe:ridge[own-rollouts]", "agent_id": f"a{i}", "run": "all", "step": step,
                           "estimate_enjoy": 0.4 + i / step, "estimate_fluency": 0.5})
    pd.DataFrame(results).to_csv(tmp_path / "results.csv", index=False)
    pd.DataFrame(truth).to_csv(tmp_path / "truth.csv", index=False)
    pd.DataFrame(curves).to_parquet(tmp_path / "curves.parquet")
    params = tmp_path / "params.yaml"
    # the headline estimator: the one with learning curves, named as the catalog spells it
    params.write_text("report:\n  bootstrap_resamples: 50\n  enigma_estimator: spe:ridge[own-rollouts]\n")
    out = runner.invoke(app, ["report", "build", "--results", str(tmp_path / "results.csv"), "--benchmark", "toy",
                              "--truth", str(tmp_path / "truth.csv"), "--curves", str(tmp_path / "curves.parquet"),
                              "--out", str(tmp_path / "reports"), "--params", str(params), "--plots", *options])
    assert out.exit_code == 0, out.output
    report = tmp_path / "reports" / "toy"
    return report / "index.html", json.loads((report / "summary.json").read_text())


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, dict]:
    return _build(tmp_path_factory.mktemp("report"), "--figures", "all")


@pytest.fixture(scope="module")
def headline_report(tmp_path_factory) -> tuple[Path, dict]:
    return _build(tmp_path_factory.mktemp("headline"))


def _links_resolve(html: Path) -> _Page:
    """Every image link finds its file and every in-page link its element; every figure in the
    folder is linked."""
    page = _Page()
    page.feed(html.read_text(encoding="utf-8"))
    pngs = {p.relative_to(html.parent).as_posix() for p in html.parent.rglob("*.png")}
    linked = set()
    for src in page.images:
        parts = urllib.parse.urlsplit(src)
        assert not parts.scheme and not parts.netloc and not parts.query and not parts.fragment, src
        # a browser percent-decodes the path before it looks for the file
        target = html.parent / urllib.parse.unquote(parts.path)
        assert target.is_file(), f"<img src={src!r}> points at {target}, which does not exist"
        linked.add(target.relative_to(html.parent).as_posix())
    assert linked == pngs  # and no figure is left without a link
    assert all(set(name) <= set("abcdefghijklmnopqrstuvwxyz0123456789._-/") for name in pngs)
    for href in page.anchors:
        assert href.startswith("#") and href[1:] in page.ids, f"<a href={href!r}> names no element on the page"
    return page


def test_every_image_link_resolves_to_a_file_as_a_browser_reads_it(report):
    html, _ = report
    page = _links_resolve(html)
    # overview + (vs truth, error) per estimator + one learning-curve figure
    assert len(page.images) == 1 + 2 * len(NAMES) + 1
    assert len(page.anchors) == len(NAMES)  # every estimator's name leads to its figures


def test_a_headline_report_draws_the_overview_and_the_headline_estimators_figures_only(headline_report):
    """Issue 59: the default page draws the overview and report.enigma_estimator's figures; the
    other estimators keep their rows, and the page says in plain text how to get their figures."""
    html, summary = headline_report
    page = _links_resolve(html)
    names = sorted(p.name for p in (html.parent / "figures").glob("*.png"))
    safe = slugs(NAMES)["spe:ridge[own-rollouts]"]  # its twin spe-ridge-own-rollouts makes it a digested slug
    assert len(page.images) == 4 and names == sorted(["overview.png", f"{safe}_vs_truth.png", f"{safe}_error.png", f"{safe}_curves.png"])
    assert page.anchors == [f"#est-{safe}"]  # only the estimator with figures is a link
    text = " ".join("".join(page.text).split())
    for name in NAMES:  # every estimator is still in the tables
        assert name in text and name in summary["estimators"]
    assert "draws the headline figures only" in text and "enigma report build --figures all" in text


def test_figures_other_than_headline_or_all_are_refused(tmp_path):
    with pytest.raises(EvaluationError, match="figures 'some': expected one of headline, all"):
        write_report(pd.DataFrame(), pd.DataFrame(), "toy", tmp_path, figures="some")


def test_text_is_escaped_once_and_flags_break_lines_with_real_markup(report):
    html, summary = report
    page = _Page()
    page.feed(html.read_text(encoding="utf-8"))
    text = "".join(page.text)
    for literal in ("<br", "&lt;", "&gt;", "&amp;", "&#39;", "&#"):
        assert literal not in text, f"the page shows {literal!r} as text"
    assert "a<b>&c #1?%20" in text  # the odd name reads as itself
    flags = summary["estimators"]["constant"]["flags"]
    assert len(flags) == 2
    cell = next(c for c in page.flag_cells if c and c[0] == flags[0])
    assert cell == [flags[0], "<br>", flags[1]]


def test_the_page_shows_verdict_accuracy_and_the_calibrated_interval_first(report):
    """Issue 61: a "verdict accuracy" table per estimator (called, wrong, power at gap > 0.05) and
    the calibrated interval as the first, default column of the per-agent intervals."""
    html, summary = report
    page = _Page()
    page.feed(html.read_text(encoding="utf-8"))
    text = "".join(page.text)
    assert "Verdict accuracy" in text and "power at gap > 0.05" in text
    v = summary["estimators"]["spe:ridge[own-rollouts]"]["enjoy"]["verdicts"]
    assert f"{v['called']} / {v['pairs']}" in text
    assert text.index("enjoy: calibrated coverage / width") < text.index("enjoy: conformal coverage / width")


def test_slugs_are_safe_and_distinct():
    got = slugs(NAMES)
    assert got["spe:ridge[own-rollouts]"] != got["spe-ridge-own-rollouts"]
    assert got["constant"] == "constant"
    assert len(set(got.values())) == len(NAMES)
    assert all(set(s) <= set("abcdefghijklmnopqrstuvwxyz0123456789._-") for s in got.values())
