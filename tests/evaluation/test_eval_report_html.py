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


class _HeadlineTable(HTMLParser):
    """The cells of the page's first table of class "headline" (row by row, the head row first),
    the text of the paragraphs of class "headline", and whether that table comes before them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self.notes: list[str] = []
        self.order: list[str] = []
        self._in, self._cell, self._note = None, None, None

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag == "table" and "headline" in classes and not self.rows:
            self._in = "table"
            self.order.append("table")
        elif self._in == "table" and tag == "tr":
            self.rows.append([])
        elif self._in == "table" and tag in ("td", "th"):
            self._cell = ""
        elif tag == "p" and "headline" in classes:
            self._note = ""
            self.order.append("note")
        elif tag == "br" and self._note is not None:
            self.notes.append(self._note)
            self._note = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(self._cell)
            self._cell = None
        elif tag == "table" and self._in == "table":
            self._in = "done"
        elif tag == "p" and self._note is not None:
            self.notes.append(self._note)
            self._note = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._note is not None:
            self._note += data


def _toy_report(tmp_path: Path, noise: dict[str, float], split: str = "") -> tuple[_HeadlineTable, dict, str]:
    """A report built by ``enigma report build`` from estimators that are the truth plus noise of
    the given size (ENIGMA is ``enigma``), 12 agents; ``split``: params.yaml's report.split."""
    rng = np.random.default_rng(0)
    truth, results = [], []
    for i in range(12):
        for r in ("enjoy", "fluency"):
            t = 0.3 + 0.05 * i + (0.1 if r == "fluency" else 0.0)
            truth.append({"agent_id": f"a{i}", "rating": r, "value": t})
            results += [{"estimator": name, "agent_id": f"a{i}", "rating": r, "estimate": t + rng.normal(0, sd)}
                        for name, sd in noise.items()]
    pd.DataFrame(results).to_csv(tmp_path / "results.csv", index=False)
    pd.DataFrame(truth).to_csv(tmp_path / "truth.csv", index=False)
    params = tmp_path / "params.yaml"
    params.write_text(f"report:\n  bootstrap_resamples: 50\n  plots: false\n{split}")
    out = runner.invoke(app, ["report", "build", "--results", str(tmp_path / "results.csv"), "--benchmark", "toy",
                              "--truth", str(tmp_path / "truth.csv"), "--out", str(tmp_path / "reports"), "--params", str(params)])
    assert out.exit_code == 0, out.output
    report = tmp_path / "reports" / "toy"
    page = _HeadlineTable()
    page.feed((report / "index.html").read_text(encoding="utf-8"))
    return page, json.loads((report / "summary.json").read_text()), out.output


def test_the_page_leads_with_a_table_of_enigma_against_the_best_other_estimator(tmp_path):
    """Goal 3 of issue 73: the page opens with a table, not a paragraph: a row for the test half,
    the dev half and all agents, with ENIGMA's mean Pearson [CI], the best other estimator and its
    mean, ENIGMA minus it [paired CI] and ENIGMA's rank; no sentence follows where ENIGMA is first."""
    page, summary, printed = _toy_report(tmp_path, {"enigma": 0.01, "ridge": 0.1, "bleu": 0.3})
    halves, est = summary["splits"], summary["estimators"]
    assert page.order[0] == "table" and page.rows[0] == [
        "agents", "ENIGMA: mean Pearson [95% CI]", "best other estimator: mean Pearson",
        "ENIGMA − best other [95% CI, paired]", "ENIGMA's rank"]
    assert [r[0] for r in page.rows[1:]] == [f"test half ({len(halves['test'])} agents)",
                                             f"dev half ({len(halves['dev'])} agents)", "all agents (12)"]
    scopes = [(lambda e: e["split"]["test"], summary["split_comparison"]["test"]),
              (lambda e: e["split"]["dev"], summary["split_comparison"]["dev"]),
              (lambda e: e, summary["comparison"])]
    for row, (scope, comparison) in zip(page.rows[1:], scopes):
        enigma, ridge, d = scope(est["enigma"]), scope(est["ridge"]), comparison["enigma_minus_best_other"]
        lo, hi = enigma["mean_pearson_ci95"]
        assert (d["first"], d["other"]) == ("enigma", "ridge") and d["difference"] > 0
        assert d["difference"] == pytest.approx(enigma["mean_pearson"] - ridge["mean_pearson"])
        assert row[1:] == [f"{enigma['mean_pearson']:.3f} [{lo:.3f}, {hi:.3f}]", f"ridge {ridge['mean_pearson']:.3f}",
                           f"{d['difference']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]", "1 of 3"]
    assert page.notes == [] and all(r["note"] is None for r in summary["headline_table"])
    # the old sentence stays in summary.json (MLflow, the flows and scripts read it), not on the page
    assert summary["headline"].startswith("Test half") and "ENIGMA ranks 1 of 3" in summary["headline"]
    assert "ENIGMA ranks" not in (tmp_path / "reports" / "toy" / "index.html").read_text(encoding="utf-8")
    # enigma report build prints the same table, a line per row
    lines = [" ".join(line.split()) for line in printed.splitlines()]
    for row in page.rows:
        assert " ".join(" ".join(row).split()) in lines


def test_where_enigma_is_not_first_a_plain_sentence_follows_the_table(tmp_path):
    page, summary, printed = _toy_report(tmp_path, {"enigma": 0.3, "ridge": 0.01, "bleu": 0.2})
    assert page.order == ["table", "note"]
    assert [r[-1] for r in page.rows[1:]] == ["3 of 3"] * 3
    assert page.notes == [
        f"ENIGMA is not first {where}: it ranks 3 of 3; ridge ranks first with {first:.3f} against ENIGMA's {own:.3f}."
        for where, first, own in [
            ("on the test half", summary["estimators"]["ridge"]["split"]["test"]["mean_pearson"],
             summary["estimators"]["enigma"]["split"]["test"]["mean_pearson"]),
            ("on the dev half", summary["estimators"]["ridge"]["split"]["dev"]["mean_pearson"],
             summary["estimators"]["enigma"]["split"]["dev"]["mean_pearson"]),
            ("across all agents", summary["estimators"]["ridge"]["mean_pearson"], summary["estimators"]["enigma"]["mean_pearson"])]]
    assert [r["note"] for r in summary["headline_table"]] == page.notes
    assert all(note in printed for note in page.notes)  # and enigma report build prints them


@pytest.mark.parametrize("kind, rows", [("test_only", ["test half (12 agents)", "all agents (12)"]),
                                        ("dev_only", ["dev half (12 agents)", "all agents (12)"])])
def test_a_benchmark_whose_agents_are_all_in_one_half_has_no_row_for_the_other(tmp_path, kind, rows):
    page, summary, _ = _toy_report(tmp_path, {"enigma": 0.01, "bleu": 0.3}, f"  split: {{{kind}: [toy]}}\n")
    assert [r[0] for r in page.rows[1:]] == rows
    assert [r["half"] for r in summary["headline_table"]] == [rows[0].split()[0], "all"]
