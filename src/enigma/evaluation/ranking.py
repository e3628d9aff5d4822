"""Estimators ranked by their mean correlation over ratings, and the paired comparisons a report
draws from the ranking: the first-ranked against the runner-up and against ENIGMA, and ENIGMA
against the best estimator that is not one of its own settings."""

from __future__ import annotations

import math
from typing import Any

from enigma.evaluation.config import ReportConfig
from enigma.evaluation.correlation import EstimatorScore, paired_difference


def rank(scores: dict[str, EstimatorScore], rank_by: str = "mean_pearson") -> list[str]:
    """Estimators best first by the mean over ratings; undefined means go last."""
    stat = rank_by[len("mean_") :]

    def key(name: str):
        v = scores[name].means[stat]
        return (0, -v, name) if math.isfinite(v) else (1, 0.0, name)

    return sorted(scores, key=key)


def is_enigma_setting(name: str, enigma: str) -> bool:
    """Whether ``name`` is one of ENIGMA's own rows rather than another estimator: a setting
    studied beside it or a former default (params.yaml names them ``<enigma>-<setting>``) or a
    figure derived from its run (``<enigma>-unnormalised``)."""
    return name.startswith(f"{enigma}-")


def best_other(ranking: list[str], enigma: str) -> str | None:
    """The best-ranked estimator that is neither ENIGMA nor one of its own settings."""
    return next((n for n in ranking if n != enigma and not is_enigma_setting(n, enigma)), None)


def only_own_settings_above(ranking: list[str], enigma: str) -> bool:
    """Whether every estimator ranked above ENIGMA is one of its own settings (none above: true)."""
    return all(is_enigma_setting(n, enigma) for n in ranking[: ranking.index(enigma)])


def comparisons(ranking: list[str], scores: dict[str, EstimatorScore], cfg: ReportConfig) -> dict[str, Any]:
    stat = cfg.rank_by[len("mean_") :]
    out: dict[str, Any] = {}
    if len(ranking) >= 2:
        d = paired_difference(scores[ranking[0]], scores[ranking[1]], stat, cfg.confidence)
        if d is not None:
            out["first_vs_runner_up"] = {"first": ranking[0], "other": ranking[1], "stat": cfg.rank_by, **d}
    enigma = cfg.enigma_estimator
    if enigma in scores and ranking and ranking[0] != enigma:
        d = paired_difference(scores[ranking[0]], scores[enigma], stat, cfg.confidence)
        if d is not None:
            out["first_vs_enigma"] = {"first": ranking[0], "other": enigma, "stat": cfg.rank_by, **d}
        # Only ENIGMA's own settings above it: the question a user asks of a full report is
        # whether ENIGMA beats the other estimators, so pair it with the best of those as well.
        other = best_other(ranking, enigma)
        if other is not None and only_own_settings_above(ranking, enigma):
            d = paired_difference(scores[enigma], scores[other], stat, cfg.confidence)
            if d is not None:
                out["enigma_vs_best_other"] = {"first": enigma, "other": other, "stat": cfg.rank_by, **d}
    return out


def enigma_minus_best_other(ranking: list[str], scores: dict[str, EstimatorScore], cfg: ReportConfig) -> dict[str, Any] | None:
    """ENIGMA's mean minus the best other estimator's (``best_other``), with its paired interval:
    the question of the README's table and of a report's headline. None where ENIGMA or any other
    estimator is missing, or the two were not scored on the same agents."""
    enigma = cfg.enigma_estimator
    other = best_other(ranking, enigma) if enigma in scores else None
    d = other and paired_difference(scores[enigma], scores[other], cfg.rank_by[len("mean_"):], cfg.confidence)
    return {"first": enigma, "other": other, "stat": cfg.rank_by, **d} if d else None
