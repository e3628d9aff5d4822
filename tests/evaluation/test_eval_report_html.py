"""The HTML report as a browser reads it: every image link finds its file, and text is escaped
exactly once (no literal markup, no double escapes). Built through ``enigma report build``."""

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

runner = CliRunner()

# Names as the catalog spells them (brackets, colons) and worse: markup, an ampersand, a space,
# a fragment and query character, a percent sign, and two names that differ only in punctuation.
NAMES = ["spe:ridge[own-rollouts]", "a<b>&c #1?%20", "spe-ridge-own-rollouts", "constant"]


class _Page(HTMLParser):
    """The images, the text a reader sees, and each flag cell's pieces of text and <br>s."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.images: list[str] = []
        self.text: list[str] = []
        self.flag_cells: list[list[str]] = []
        self._in_flag = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
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


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, dict]:
    tmp_path = tmp_path_factory.mktemp("report")
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
    params.write_text("report:\n  bootstrap_resamples: 50\n")
    out = runner.invoke(app, ["report", "build", "--results", str(tmp_path / "results.csv"), "--benchmark", "toy",
                              "--truth", str(tmp_path / "truth.csv"), "--curves", str(tmp_path / "curves.parquet"),
                              "--out", str(tmp_path / "reports"), "--params", str(params), "--plots"])
    assert out.exit_code == 0, out.output
    report = tmp_path / "reports" / "toy"
    return report / "index.html", json.loads((report / "summary.json").read_text())


def test_every_image_link_resolves_to_a_file_as_a_browser_reads_it(report):
    html, _ = report
    page = _Page()
    page.feed(html.read_text(encoding="utf-8"))
    # overview + (vs truth, error) per estimator + one learning-curve figure
    assert len(page.images) == 1 + 2 * len(NAMES) + 1
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
    from enigma.evaluation.report import slugs

    got = slugs(NAMES)
    assert got["spe:ridge[own-rollouts]"] != got["spe-ridge-own-rollouts"]
    assert got["constant"] == "constant"
    assert len(set(got.values())) == len(NAMES)
    assert all(set(s) <= set("abcdefghijklmnopqrstuvwxyz0123456789._-") for s in got.values())
