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
    """The test half first (the agents no choice read), then the dev half, in one sentence each."""
    enigma = cfg.enigma_estimator
    stat = cfg.rank_by[len("mean_") :]
    parts = []
    for h in HALVES:
        order, sc = ranking[h], scores[h]
        if not order or not halves[h]:
            continue
        what = "which no choice read" if h == "test" else "where choices are made"
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
