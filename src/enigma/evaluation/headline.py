"""What a report leads with: who ranks first and where ENIGMA stands, on the test half, the
dev half and all agents (``summary.json``'s ``headline``)."""

from __future__ import annotations

import math
from typing import Any

from enigma.evaluation.config import ReportConfig
from enigma.evaluation.correlation import EstimatorScore, paired_difference
from enigma.evaluation.ranking import best_other, only_own_settings_above
from enigma.evaluation.split import HALVES


def split_headline(halves: dict[str, list[str]], ranking: dict[str, list[str]], scores: dict[str, dict[str, EstimatorScore]],
                   comparison: dict[str, dict[str, Any]], cfg: ReportConfig) -> str:
    """The test half first (the agents no rule of choice reads), then the dev half, in one sentence each."""
    enigma = cfg.enigma_estimator
    stat = cfg.rank_by[len("mean_") :]
    parts = []
    for h in HALVES:
        order, sc = ranking[h], scores[h]
        if not order or not halves[h]:
            continue
        # the test half has been seen (every report shows it), so the label says only what is true:
        # no rule of choice reads it
        what = "which no rule of choice reads" if h == "test" else "where choices are made"
        text = f"{h.capitalize()} half ({len(halves[h])} agents, {what}):"
        if enigma in sc:
            e = sc[enigma]
            text += f" ENIGMA ranks {order.index(enigma) + 1} of {len(order)} with {_fmt(e.means[stat])} ({_fmt_ci(e.mean_ci[stat])})"
            other = best_other(order, enigma)
            if other is not None:
                d = paired_difference(sc[enigma], sc[other], stat, cfg.confidence)
                gap = f" {_fmt_signed(d['difference'])} ({_fmt_ci(d['ci95'])}, paired)" if d else ""
                text += f"; the best other estimator, {other}, {_fmt(sc[other].means[stat])}, ENIGMA{gap}"
            text += "."
        else:
            text += f" {order[0]} ranks first with {_fmt(sc[order[0]].means[stat])}."
        parts.append(text)
    return " ".join(parts)


def _fmt_signed(v: float | None) -> str:
    return "undefined" if v is None or not math.isfinite(v) else f"{v:+.3f}"


def _fmt(v: float | None) -> str:
    return "undefined" if v is None or not math.isfinite(v) else f"{v:.3f}"


def _fmt_ci(ci) -> str:
    if not ci or ci[0] is None:
        return "no interval"
    return f"95% CI [{ci[0]:.3f}, {ci[1]:.3f}]"


def headline(
    benchmark: str, ranking: list[str], scores: dict[str, EstimatorScore], comparison: dict[str, Any], cfg: ReportConfig
) -> str:
    """One plain sentence (or three): who ranks first, and whether ENIGMA is not the best."""
    if not ranking:
        return f"{benchmark}: no estimator results."
    stat = cfg.rank_by[len("mean_") :]
    label = f"mean {stat.capitalize()} over ratings"
    first = scores[ranking[0]]
    runner = comparison.get("first_vs_runner_up")
    margin = (
        f", ahead of {runner['other']} by {_fmt(runner['difference'])} ({_fmt_ci(runner['ci95'])}, paired)"
        if runner
        else ""
    )
    parts = [
        f"On {benchmark}, {ranking[0]} ranks first of {len(ranking)} estimator(s) by {label}: "
        f"{_fmt(first.means[stat])} ({_fmt_ci(first.mean_ci[stat])}, {len(first.agents)} agents){margin}."
    ]
    if first.flags:
        parts.append(f"Caution: {ranking[0]} is flagged ({first.flags[0]}).")
    enigma = cfg.enigma_estimator
    if enigma not in scores:
        parts.append(f"ENIGMA ({enigma!r}) is not in this report.")
    elif ranking[0] == enigma:
        parts.append("ENIGMA is the best estimator here.")
    else:
        pos = ranking.index(enigma) + 1
        e = scores[enigma]
        d = comparison.get("first_vs_enigma")
        gap = f"; {ranking[0]} leads by {_fmt(d['difference'])} ({_fmt_ci(d['ci95'])})" if d else ""
        if only_own_settings_above(ranking, enigma):
            # only its own studied settings rank above it: ENIGMA still leads the other estimators
            other = comparison.get("enigma_vs_best_other")
            lead = (f", ahead of {other['other']} by {_fmt(other['difference'])} ({_fmt_ci(other['ci95'])}, paired)"
                    if other else "")
            parts.append(
                f"ENIGMA is the best estimator here that is not one of its own settings: it ranks {pos} of "
                f"{len(ranking)} with {_fmt(e.means[stat])} ({_fmt_ci(e.mean_ci[stat])}){lead}. "
                f"{pos - 1} of its own settings rank above it{gap}."
            )
        else:
            parts.append(
                f"ENIGMA is NOT the best estimator on this benchmark: it ranks {pos} of {len(ranking)} with "
                f"{_fmt(e.means[stat])} ({_fmt_ci(e.mean_ci[stat])}){gap}."
            )
    return " ".join(parts)


ROWS = (*HALVES, "all")  # the headline table's rows, in order: the test half leads
_WHERE = {"test": "on the test half", "dev": "on the dev half", "all": "across all agents"}


def headline_table(halves: dict[str, list[str]], split_ranking: dict[str, list[str]],
                   half_scores: dict[str, dict[str, EstimatorScore]], split_comparison: dict[str, dict[str, Any]],
                   ranking: list[str], scores: dict[str, EstimatorScore], comparison: dict[str, Any],
                   cfg: ReportConfig) -> list[dict[str, Any]]:
    """The table a report leads with: one row for the test half, the dev half and all agents (a
    half without agents has none; no rows where ENIGMA is not in the report), each with ENIGMA's
    mean (``report.rank_by``) and its interval, the best other estimator (``ranking.best_other``)
    and its mean, ENIGMA minus it with the paired interval, and ENIGMA's rank. ``note``: where
    ENIGMA is not first, a sentence that says so (None where it is)."""
    enigma, stat = cfg.enigma_estimator, cfg.rank_by[len("mean_"):]
    rows = []
    for h in ROWS:
        order, sc, pair, n = ((ranking, scores, comparison.get("enigma_minus_best_other"), sum(map(len, halves.values())))
                              if h == "all" else (split_ranking[h], half_scores[h],
                                                  split_comparison[h].get("enigma_minus_best_other"), len(halves[h])))
        if not n or enigma not in sc:
            continue
        other = best_other(order, enigma)
        rows.append({
            "half": h, "n_agents": n, "stat": cfg.rank_by,
            "enigma": {"estimator": enigma, "value": sc[enigma].means[stat], "ci95": sc[enigma].mean_ci[stat]},
            "best_other": None if other is None else {"estimator": other, "value": sc[other].means[stat],
                                                      "ci95": sc[other].mean_ci[stat]},
            "difference": {"value": pair["difference"], "ci95": pair["ci95"]} if pair else None,
            "rank": order.index(enigma) + 1, "of": len(order), "first": order[0],
            "note": _not_first(h, order, sc, enigma, stat),
        })
    return rows


def _not_first(half: str, order: list[str], scores: dict[str, EstimatorScore], enigma: str, stat: str) -> str | None:
    """Where ENIGMA is not first, the plain sentence that says so; None where it is."""
    pos = order.index(enigma)
    if pos == 0:
        return None
    text = f"ENIGMA is not first {_WHERE[half]}: it ranks {pos + 1} of {len(order)}"
    if only_own_settings_above(order, enigma):
        own = order[:pos]
        return (f"{text}, below only its own setting{'s' if len(own) > 1 else ''} {', '.join(own)}; "
                "it leads every other estimator.")
    return (f"{text}; {order[0]} ranks first with {_fmt(scores[order[0]].means[stat])} against ENIGMA's "
            f"{_fmt(scores[enigma].means[stat])}.")


def headline_cells(row: dict[str, Any]) -> dict[str, str]:
    """One row of the headline table as text: the half with its agents, ENIGMA's mean [CI], the
    best other estimator and its mean, ENIGMA minus it [paired CI], and ENIGMA's rank ("n/a"
    where a number is undefined, "none" where there is no other estimator)."""
    other, diff = row["best_other"], row["difference"]
    half = f"{row['half']} half ({row['n_agents']} agents)" if row["half"] in HALVES else f"all agents ({row['n_agents']})"
    return {
        "half": half,
        "enigma": f"{_num(row['enigma']['value'])} {_interval(row['enigma']['ci95'])}".rstrip(),
        "best_other": "none" if other is None else f"{other['estimator']} {_num(other['value'])}",
        "difference": "n/a" if diff is None else f"{_num(diff['value'], signed=True)} {_interval(diff['ci95'], signed=True)}".rstrip(),
        "rank": f"{row['rank']} of {row['of']}",
    }


def headline_columns(stat: str, confidence: float) -> dict[str, str]:
    """The headline table's column heads, for ``report.rank_by`` ``stat`` (e.g. mean_pearson)."""
    label, pct = f"mean {stat[len('mean_'):].capitalize()}", f"{round(confidence * 100)}% CI"
    return {"half": "agents", "enigma": f"ENIGMA: {label} [{pct}]", "best_other": f"best other estimator: {label}",
            "difference": f"ENIGMA − best other [{pct}, paired]", "rank": "ENIGMA's rank"}


def _num(v: float | None, signed: bool = False) -> str:
    if v is None or not math.isfinite(v):
        return "n/a"
    return f"{v:+.3f}" if signed else f"{v:.3f}"


def _interval(ci, signed: bool = False) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return ""
    return f"[{_num(ci[0], signed)}, {_num(ci[1], signed)}]"
