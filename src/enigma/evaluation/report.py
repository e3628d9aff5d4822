"""A benchmark's report: ``summary.json``, the figures and ``index.html`` in one folder
(``reports/<benchmark>/``), built from a leave-one-agent-out results table and the truth.

Figures come in two sets. ``headline`` (the default): the overview and the figures of the
estimator the headline is about (``report.enigma_estimator``; the first-ranked one where that
estimator is not in the report); every estimator keeps its rows in the page's tables. ``all``:
every estimator's figures as well. The committed main reports are headline ones (git keeps them
small); the full reports (``dvc repro report_full@<benchmark>``) draw them all."""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import jinja2
import pandas as pd
from tqdm.auto import tqdm

from enigma.evaluation import figures as draw
from enigma.evaluation.ablations import with_unnormalised
from enigma.evaluation.config import ReportConfig
from enigma.evaluation.errors import EvaluationError
from enigma.evaluation.headline import headline_cells, headline_columns
from enigma.evaluation.intervals import interval_text
from enigma.evaluation.results import RESULT_COLUMNS, check_results, read_curves, read_results
from enigma.evaluation.summary import build_summary
from enigma.evaluation.summary_file import write_summary

SUMMARY_FILE = "summary.json"
HTML_FILE = "index.html"
FIG_DIR = "figures"
FIGURE_SETS = ("headline", "all")
# Where a headline page says the other figures are, unless its caller knows better (the pipeline
# names the full report and its DVC stage).
MORE_FIGURES = "Every estimator's figures: build the report with figures 'all' (enigma report build --figures all)."

# the headline table's columns, in order (headline.headline_cells)
HEADLINE_CELLS = ("half", "enigma", "best_other", "difference", "rank")

REGIME_TEXT = {
    "none": "nothing about the agent",
    "replies-at-logged-states": "(a) its replies at logged states",
    "own-rollouts": "(b) its own self-play / simulated-user dialogues",
    "own-unrated-dialogues": "(c) its own human dialogues, ratings hidden",
}

TEMPLATE = jinja2.Template(
    """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ s.benchmark }}: leave-one-agent-out report</title>
<style>
body { font-family: sans-serif; margin: 2em; max-width: 1400px; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; vertical-align: top; }
th:first-child, td.name, td.text { text-align: left; }
td.flag { color: #a40000; text-align: left; max-width: 28em; }
p.headline { font-size: 16px; background: #f4f4f4; padding: .6em; border-left: 4px solid #555; }
table.headline { font-size: 15px; background: #f4f4f4; border-left: 4px solid #555; }
table.headline th, table.headline td { padding: 5px 10px; }
img { max-width: 100%; }
</style></head><body>
<h1>{{ s.benchmark }}: how well each estimator predicts every agent's rating</h1>
{% if s.headline_table %}{% set heads = headline_columns(s.headline_table[0].stat, s.settings.confidence) %}
<table class="headline"><tr>{% for k in cells %}<th>{{ heads[k] }}</th>{% endfor %}</tr>
{% for row in s.headline_table %}{% set c = headline_cells(row) %}<tr>{% for k in cells %}<td{% if k in ("half", "best_other") %} class="name"{% endif %}>{{ c[k] }}</td>{% endfor %}</tr>
{% endfor %}</table>
{% set notes = s.headline_table | selectattr("note") | map(attribute="note") | list %}
{% if notes %}<p class="headline">{% for n in notes %}{{ n }}{% if not loop.last %}<br>{% endif %}{% endfor %}</p>{% endif %}
{% else %}<p class="headline">{{ s.headline }}</p>{% endif %}
<p>{{ s.n_agents }} agents, each held out in turn: an estimator sees the other agents' rated dialogues
and only what its information regime allows about the held-out agent. Correlations are across agents;
intervals are {{ (s.settings.confidence * 100) | round | int }}% {{ s.settings.interval }}
({{ s.settings.bootstrap_resamples }} resamples, seed {{ s.settings.seed }}).
The spread ratio is std(estimates) / std(truth): near 0 the estimator has collapsed to a constant
(flagged below {{ s.settings.collapse_spread_ratio }}, or below 1.5/(n&minus;1) with few agents), and a constant such as the leave-one-out mean
correlates &minus;1 with truth by construction. An estimator that is mostly that mean plus a little is flagged where its
estimates' Pearson with {{ s.settings.loo_mean_estimator }} (the leave-one-out mean of the other agents' logs) reaches
{{ s.settings.loo_mean_flag }}; the per-rating table gives that Pearson and, where the mean and the truth are not collinear,
the partial Pearson with the truth beyond it.</p>

{% if s.split_ranking %}<h2>The test half first, the dev half beside it</h2>
<p>The agents are split once into a test half ({{ s.splits.test | length }} agents) and a dev half ({{ s.splits.dev | length }})
by {{ s.settings.split.rule }} (salt {{ s.settings.split.salt }}). Every agent is still estimated from all the other agents' logs;
only the agents a correlation is taken over differ. The rules that choose settings read the dev half only; the test half is shown in every report, so it has been seen, but no rule reads it.</p>
<table><tr><th>test rank</th><th>estimator</th><th>test: mean Pearson [CI]</th><th>test: mean Spearman</th><th>dev: mean Pearson [CI]</th><th>dev: mean Spearman</th></tr>
{% for row in s.split_ranking.test %}{% set e = s.estimators[row.estimator] %}
<tr><td>{{ loop.index }}</td><td class="name">{{ row.estimator }}</td>
<td>{{ f(e.split.test.mean_pearson) }} {{ ci(e.split.test.mean_pearson_ci95) }}</td><td>{{ f(e.split.test.mean_spearman) }}</td>
<td>{{ f(e.split.dev.mean_pearson) }} {{ ci(e.split.dev.mean_pearson_ci95) }}</td><td>{{ f(e.split.dev.mean_spearman) }}</td></tr>
{% endfor %}</table>{% endif %}

<h2>All agents: estimators side by side</h2>
<table><tr><th>rank</th><th>estimator</th><th>information regime</th><th>labels</th>
<th>mean Pearson [CI]</th><th>mean Spearman [CI]</th><th>mean Kendall [CI]</th><th>agents</th><th>smallest spread ratio</th><th>flags</th></tr>
{% for name in order %}{% set e = s.estimators[name] %}
<tr><td>{{ loop.index }}</td><td class="name">{% if name in figs %}<a href="#est-{{ slugs[name] }}">{{ name }}</a>{% else %}{{ name }}{% endif %}</td>
<td class="text">{% for r in e.regime %}{{ regime_text(r) }}{% if not loop.last %}; {% endif %}{% endfor %}</td>
<td class="text">{% for k, v in e.labels.items() %}{{ k }}: {{ v }}{% if not loop.last %}<br>{% endif %}{% endfor %}</td>
<td>{{ f(e.mean_pearson) }} {{ ci(e.mean_pearson_ci95) }}</td><td>{{ f(e.mean_spearman) }} {{ ci(e.mean_spearman_ci95) }}</td>
<td>{{ f(e.mean_kendall) }} {{ ci(e.mean_kendall_ci95) }}</td><td>{{ e.n_agents }}</td>
<td>{{ f(min_spread(e)) }}</td><td class="flag">{% for fl in e.flags %}{{ fl }}{% if not loop.last %}<br>{% endif %}{% endfor %}</td></tr>
{% endfor %}</table>
{% if overview %}<img src="{{ overview }}" alt="overview">{% endif %}

<h2>Per rating: Pearson / Spearman / Kendall (spread ratio; Pearson with the leave-one-out mean | partial Pearson beyond it)</h2>
<table><tr><th>estimator</th>{% for r in s.ratings %}<th>{{ r }}</th>{% endfor %}</tr>
{% for name in order %}{% set e = s.estimators[name] %}<tr><td class="name">{{ name }}</td>
{% for r in s.ratings %}<td title="Pearson CI {{ ci(e[r].pearson_ci95) }}">{{ f(e[r].pearson) }} / {{ f(e[r].spearman) }} / {{ f(e[r].kendall) }} ({{ f(e[r].spread_ratio) }}{% if e[r].loo_mean_pearson is not none %}; {{ f(e[r].loo_mean_pearson) }} | {{ f(e[r].partial_pearson) }}{% endif %})</td>{% endfor %}</tr>
{% endfor %}</table>

<h2>How sure is each estimate: per-agent intervals and their coverage</h2>
<p>Three {{ (s.settings.confidence * 100) | round | int }}% intervals per agent. <b>Calibrated</b> (the default, the one
<code>enigma estimate</code> and the nightly report give): {{ s.settings.agent_interval.calibrated }}; each agent is calibrated
on the other agents, as a new agent is on the store's. <b>Sampling</b>: {{ s.settings.agent_interval.sampling }}
(only where the estimator gives one); it is blind to the estimator's bias. <b>Conformal</b>: {{ s.settings.agent_interval.conformal }}
(unbounded with fewer than 19 other agents). Coverage: the share of agents whose truth lies inside their interval; width: the mean
width.</p>
<table><tr><th>estimator</th>{% for r in s.ratings %}<th>{{ r }}: calibrated coverage / width</th><th>{{ r }}: conformal coverage / width</th><th>{{ r }}: sampling coverage / width</th>{% endfor %}</tr>
{% for name in order %}{% set e = s.estimators[name] %}<tr><td class="name">{{ name }}</td>
{% for r in s.ratings %}<td>{{ f(e[r].interval_coverage.calibrated) }} / {{ f(e[r].interval_mean_width.calibrated) }}</td>
<td>{{ f(e[r].interval_coverage.conformal) }} / {{ f(e[r].interval_mean_width.conformal) }}</td>
<td>{% if e[r].interval_coverage.sampling is none %}none{% else %}{{ f(e[r].interval_coverage.sampling) }} / {{ f(e[r].interval_mean_width.sampling) }}{% endif %}</td>{% endfor %}</tr>
{% endfor %}</table>
{% if s.agent_intervals %}{% set ai = s.agent_intervals %}
{% for r, cells in ai.ratings.items() %}<details{% if loop.first %} open{% endif %}><summary>{{ ai.estimator }}, {{ r }}: every agent's intervals</summary>
<table><tr><th>agent</th><th>truth</th><th>estimate</th><th>calibrated interval</th><th>sampling interval</th><th>conformal interval</th></tr>
{% for agent, c in cells.items() %}<tr><td class="name">{{ agent }}</td><td>{{ f(c.truth) }}</td><td>{{ f(c.estimate) }}</td>
<td>{{ iv(c.calibrated, c.truth) }}</td><td>{{ iv(c.sampling, c.truth) }}</td><td>{{ iv(c.conformal, c.truth) }}</td></tr>{% endfor %}
</table></details>{% endfor %}{% endif %}

<h2>Verdict accuracy: is one agent better than another?</h2>
<p>Every pair of agents judged as the nightly job judges a new agent against the incumbent: {{ s.settings.verdicts }}.
Per rating: verdicts called / pairs, wrong-direction verdicts (share of those called), and power: the share of the pairs
whose true gap exceeds 0.05 called the right way.{% if s.splits %} The test half (pairs within it) first, all agents after.{% endif %}</p>
<table><tr><th>estimator</th>{% for r in s.ratings %}<th>{{ r }}: called / pairs</th><th>{{ r }}: wrong (rate)</th><th>{{ r }}: power at gap &gt; 0.05</th>{% endfor %}</tr>
{% for scope in (["test", "all"] if s.splits else ["all"]) %}
{% for name in order %}{% set e = s.estimators[name] %}<tr><td class="name">{{ name }}{% if s.splits %} ({{ scope }}){% endif %}</td>
{% for r in s.ratings %}{% set v = e[r].verdicts if scope == "all" else e[r].split[scope].verdicts %}
<td>{{ v.called }} / {{ v.pairs }}</td><td>{{ v.wrong }} ({{ f(v.wrong_rate) }})</td><td>{{ f(v.power_gap_0_05) }}</td>{% endfor %}</tr>
{% endfor %}{% endfor %}</table>

<h2>How reliable the truth is</h2>
<p>reliability = 1 &minus; mean(stderr&sup2;) / var(true values across agents); &radic;reliability is
the Pearson correlation a perfect estimator could expect against these noisy true values.</p>
<table><tr><th>rating</th><th>std across agents</th><th>mean stderr</th><th>reliability</th><th>max expected Pearson</th></tr>
{% for r in s.ratings %}{% set t = s.truth_reliability[r] %}<tr><td class="name">{{ r }}</td><td>{{ f(t.std) }}</td>
<td>{{ f(t.mean_stderr) }}</td><td>{{ f(t.reliability) }}</td><td>{{ f(t.max_pearson) }}</td></tr>{% endfor %}
</table>

{% if s.errors %}<h2>Failed runs</h2><table><tr><th>estimator</th><th>agent</th><th>error</th></tr>
{% for x in s.errors %}<tr><td class="name">{{ x.estimator }}</td><td class="name">{{ x.agent_id }}</td><td class="text">{{ x.error }}</td></tr>{% endfor %}
</table>{% endif %}

{% if figs %}<h2>{% if headline_page %}Headline figures{% else %}Figures per estimator{% endif %}</h2>
{% if figure_note %}<p>{{ figure_note }}</p>{% endif %}
{% for name in order if name in figs %}<h3 id="est-{{ slugs[name] }}">{{ name }}</h3>
{% for img in figs[name] %}<img src="{{ img }}" alt="{{ name }}"><br>{% endfor %}
{% endfor %}{% endif %}

<h2>Per agent</h2>
{% for r in s.ratings %}<details><summary>{{ r }}: truth and every estimate</summary>
<table><tr><th>agent</th><th>truth</th>{% for name in order %}<th>{{ name }}</th>{% endfor %}</tr>
{% for agent, per in s.agents.items() %}<tr><td class="name">{{ agent }}</td><td>{{ f(per[r].truth) }}</td>
{% for name in order %}<td>{{ f(per[r].get(name)) }}</td>{% endfor %}</tr>{% endfor %}
</table></details>{% endfor %}
</body></html>
""",
    autoescape=True,
)


def _f(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.3f}"


def _ci(c: Any) -> str:
    return "" if not c or c[0] is None else f"[{c[0]:.2f}, {c[1]:.2f}]"


def _min_spread(entry: dict[str, Any]) -> float | None:
    vals = [v["spread_ratio"] for v in entry.values() if isinstance(v, dict) and v.get("spread_ratio") is not None]
    return min(vals) if vals else None


_UNSAFE = re.compile(r"[^a-z0-9._-]+")


def slugs(names: list[str]) -> dict[str, str]:
    """A file-name and anchor part per estimator name made of [a-z0-9._-] only, so that a link
    needs no percent-encoding (a browser decodes ``%5B`` in a link and then finds no file named
    with it). Names that would share a slug (``a:b``, ``a-b``) each get a digest of the name."""
    base = {n: _UNSAFE.sub("-", n.lower()).strip("-.") or "estimator" for n in names}
    taken = Counter(base.values())
    return {n: s if taken[s] == 1 else f"{s}-{hashlib.sha1(n.encode()).hexdigest()[:8]}" for n, s in base.items()}


def headline_estimator(order: Sequence[str], cfg: ReportConfig) -> str | None:
    """The estimator whose figures a headline report draws: the one the headline is about, or
    the first-ranked where that one is not in the report."""
    return cfg.enigma_estimator if cfg.enigma_estimator in order else (order[0] if order else None)


def figure_note(figured: Sequence[str], more_figures: str | None = None) -> str:
    """The headline page's plain-text sentence on which figures it draws and where the others are."""
    whose = " and ".join(f"{n}'s" for n in figured) or "no estimator's"
    return (f"This page draws the headline figures only: the overview above and {whose} below; every estimator's "
            f"numbers are in the tables above. {more_figures or MORE_FIGURES}")


def render_html(summary: dict[str, Any], figs: dict[str, list[str]], overview: str | None,
                figure_note: str | None = None, headline_page: bool = True) -> str:
    """The page. ``figs``: the figures' relative paths by estimator (only these estimators get a
    figure section and a link to it); ``figure_note``: the sentence under the figures' heading (a
    headline page's on where the other figures are); ``headline_page``: false on a page that draws them all."""
    order = [r["estimator"] for r in summary["ranking"]]
    return TEMPLATE.render(
        s=summary,
        order=order,
        figs=figs,
        overview=overview,
        figure_note=figure_note,
        headline_page=headline_page,
        f=_f,
        ci=_ci,
        iv=interval_text,
        min_spread=_min_spread,
        slugs=slugs(order),
        regime_text=lambda r: REGIME_TEXT.get(r, r),
        cells=HEADLINE_CELLS,
        headline_cells=headline_cells,
        headline_columns=headline_columns,
    )


def write_report(
    results: pd.DataFrame,
    truth: pd.DataFrame,
    benchmark: str,
    out_dir: str | Path,
    config: ReportConfig | None = None,
    *,
    curves: pd.DataFrame | None = None,
    estimator_info: dict[str, dict[str, Any]] | None = None,
    note: str | None = None,
    figures: str = "headline",
    more_figures: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Write ``summary.json``, the figures and ``index.html`` under ``out_dir``; return the
    summary (with ``report_html`` and ``summary_json`` paths added). ``note`` (how the agents
    were run, e.g. stood in for by transcripts) goes into the summary. ``figures``: ``headline``
    (the overview and the headline estimator's; ``more_figures`` is the page's sentence on where
    the others are) or ``all`` (every estimator's; ``more_figures``: a sentence on where they come
    from); ``report.plots`` false draws none."""
    if figures not in FIGURE_SETS:
        raise EvaluationError(f"figures {figures!r}: expected one of {', '.join(FIGURE_SETS)}")
    cfg = config or ReportConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary, _ = build_summary(results, truth, benchmark, cfg, estimator_info=estimator_info)
    if note:
        summary["note"] = note
    order = [r["estimator"] for r in summary["ranking"]]
    figs: dict[str, list[str]] = {}
    overview = None
    note_text = None
    if cfg.plots:
        fig_dir = out / FIG_DIR
        names = slugs(order)
        figured = order if figures == "all" else [n for n in [headline_estimator(order, cfg)] if n is not None]
        # a headline page says which figures it draws and where the rest are; a page of every
        # figure says only where its figures come from (more_figures), if the caller gives that
        note_text = figure_note(figured, more_figures) if figures == "headline" else more_figures
        # links are relative URLs: forward slashes on every platform
        overview = draw.overview_figure(summary, order, fig_dir / "overview.png").relative_to(out).as_posix()
        for name in tqdm(figured, desc="report figures", unit="estimator", disable=not progress):
            safe = names[name]
            paths = [
                draw.regression_figure(summary, name, fig_dir / f"{safe}_vs_truth.png"),
                draw.error_figure(summary, name, fig_dir / f"{safe}_error.png"),
            ]
            if curves is not None and not curves.empty:
                p = draw.learning_curve_figure(summary, curves, name, fig_dir / f"{safe}_curves.png")
                if p is not None:
                    paths.append(p)
            figs[name] = [p.relative_to(out).as_posix() for p in paths]
    html = out / HTML_FILE
    html.write_text(render_html(summary, figs, overview, note_text, headline_page=figures == "headline"))
    summary_path = write_summary(summary, out / SUMMARY_FILE)
    summary["report_html"] = str(html)
    summary["summary_json"] = str(summary_path)
    return summary


def read_result_dirs(results_dirs: Sequence[str | Path], estimators: Sequence[str] | None = None) -> pd.DataFrame:
    """The results of one or more results folders (a benchmark's main and full runs) in one
    checked table; ``estimators`` (display names): only theirs, so that a result file left by an
    estimator no longer in the benchmark is not reported."""
    rows = [r for d in results_dirs for r in read_results(d).to_dict(orient="records")]
    if estimators is not None:
        keep = set(estimators)
        rows = [r for r in rows if r["estimator"] in keep]
    return check_results(pd.DataFrame(rows, columns=RESULT_COLUMNS), ", ".join(map(str, results_dirs)) + " results")


def build_report(
    results_dirs: Sequence[str | Path],
    truth: pd.DataFrame,
    benchmark: str,
    out_dir: str | Path,
    config: ReportConfig | None = None,
    *,
    estimators: Sequence[str] | None = None,
    curves: pd.DataFrame | None = None,
    note: str | None = None,
    estimator_notes: dict[str, str] | None = None,
    figures: str = "headline",
    more_figures: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """A benchmark's report from its results folders: every estimator's results (``estimators``:
    only these), ENIGMA's ablation without post-normalisation derived from the same run
    (``<report.enigma_estimator>-unnormalised``), the learning curves found beside the results
    (or ``curves``), the note, and ``estimator_notes`` (what an estimator is, by its display name)
    in the labels column; ``figures`` and ``more_figures`` as in :func:`write_report`.
    ``enigma report build`` and the pipeline's report stage both build it here, so they give the
    same report (but for a headline page's sentence on where the other figures are)."""
    cfg = config or ReportConfig()
    table = read_result_dirs(results_dirs, estimators)
    table = with_unnormalised(table, (cfg.enigma_estimator,))
    if curves is None:
        curves = read_curves(list(results_dirs))
    info = {name: {"labels": {"note": text}} for name, text in (estimator_notes or {}).items()}
    return write_report(table, truth, benchmark, out_dir, cfg, curves=curves, estimator_info=info, note=note,
                        figures=figures, more_figures=more_figures, progress=progress)
