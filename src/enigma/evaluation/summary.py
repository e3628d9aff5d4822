"""``summary.json``: every estimator's correlations with truth, side by side.

The shape (issue 6) is ``{"benchmark", "n_agents", "ratings", "estimators": {"<est>":
{"<rating>": {"pearson", "spearman", "kendall", "pearson_ci95", "spearman_ci95",
"kendall_ci95", "spread_ratio", "loo_mean_pearson", "partial_pearson", "interval_coverage", "interval_mean_width", "interval_missed"},
"mean_pearson", "mean_spearman", "regime": [...],
"labels": {...}}}, "agents": {"<agent>": {"<rating>": {"truth": t, "<est>": e}}}}``.
Beyond it: per estimator ``mean_kendall``, intervals of the means, ``n_agents`` and ``flags``
(collapse, missing agents); ``interval_*`` per kind (``calibrated``, the default: the other agents' recalibration and
its residuals, ``evaluation.calibration``; ``sampling``: the estimator's own interval
of each estimate, null where it gives none; ``conformal``: from the other agents' residuals;
``evaluation.intervals``), per rating ``verdicts`` (every pair judged by the nightly job's rule:
``{pairs, called, wrong, wrong_rate, power_gap_0_05}``), the same per half under ``split``,
with ``agent_intervals`` (every agent's three intervals for the
report's ENIGMA estimator); at the top ``ranking``, ``comparison`` (paired bootstrap
differences of the first-ranked against the runner-up and against ENIGMA, and of ENIGMA against
the best other estimator; per half under ``split_comparison``), ``headline`` (the plain
sentence), ``headline_table`` (the same as the rows the page leads with: ``headline``),
``errors`` and ``settings``. Undefined numbers are ``null``.

How it is written to disk and read back: ``enigma.evaluation.summary_file``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from enigma.evaluation.config import ReportConfig
from enigma.evaluation.correlation import STATS, EstimatorScore, score_estimator
from enigma.evaluation.errors import EvaluationError
from enigma.evaluation.calibration import pair_verdicts, verdict_accuracy
from enigma.evaluation.intervals import KINDS, interval_coverage, interval_table
from enigma.evaluation.headline import headline, headline_table, split_headline
from enigma.evaluation.ranking import comparisons, enigma_minus_best_other, rank
from enigma.evaluation.results import check_results
from enigma.evaluation.split import HALVES, split_agents
from enigma.evaluation.truth import truth_wide

PER_RATING_KEYS = ("pearson", "spearman", "kendall", "pearson_ci95", "spearman_ci95", "kendall_ci95", "spread_ratio",
                   "loo_mean_pearson", "partial_pearson")
INTERVAL_KEYS = ("interval_coverage", "interval_mean_width", "interval_missed")  # {"calibrated": ..., "sampling": ..., "conformal": ...}
VERDICT_KEYS = ("pairs", "called", "wrong", "wrong_rate", "power_gap_0_05")  # per rating: "verdicts" (evaluation.calibration)
SPLIT_KEY = "split"  # per rating and per estimator: {"test": {...}, "dev": {...}} (evaluation.split)


def _num(v: Any) -> Any:
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, list):
        return [_num(x) for x in v]
    if isinstance(v, dict):
        return {k: _num(x) for k, x in v.items()}
    return v


def _split_set(values) -> list[str]:
    out: set[str] = set()
    for v in values:
        if isinstance(v, str) and v:
            out.update(p for p in v.split(",") if p)
    return sorted(out)


def _merge_labels(values) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        if isinstance(v, str) and v:
            try:
                out.update(json.loads(v))
            except json.JSONDecodeError:
                continue
        elif isinstance(v, dict):
            out.update(v)
    return out


def not_converged(group: pd.DataFrame) -> list[str]:
    """The agents whose run says ``converged: false`` in its diagnostics (any of its runs)."""
    if "diagnostics" not in group:
        return []
    out = []
    for agent, diag in group.drop_duplicates("agent_id")[["agent_id", "diagnostics"]].itertuples(index=False):
        try:
            d = json.loads(diag) if isinstance(diag, str) else (diag or {})
        except json.JSONDecodeError:
            continue
        if any(isinstance(v, dict) and v.get("converged") is False for v in d.values()):
            out.append(agent)
    return sorted(out)


def build_summary(
    results: pd.DataFrame,
    truth: pd.DataFrame,
    benchmark: str,
    config: ReportConfig | None = None,
    *,
    estimator_info: dict[str, dict[str, Any]] | None = None,
) -> tuple[dict[str, Any], dict[str, EstimatorScore]]:
    """The summary of a results table (``results.RESULT_COLUMNS``) against a truth table
    (``truth.TRUTH_COLUMNS``). ``estimator_info`` may supply a ``regime`` for estimators whose
    results table lacks one, and ``labels`` added to those of its results (e.g. the note of a
    params entry)."""
    cfg = config or ReportConfig()
    if results.empty:
        raise EvaluationError(f"{benchmark}: the results table is empty")
    results = check_results(results, source=f"{benchmark} results")
    tw = truth_wide(truth)
    ratings = list(cfg.ratings) if cfg.ratings else sorted(tw.columns)
    unknown = [r for r in ratings if r not in tw.columns]
    if unknown:
        raise EvaluationError(f"{benchmark}: no truth for rating(s) {unknown}; truth has {sorted(tw.columns)}")
    tw = tw[ratings]
    result_agents = set(results["agent_id"])
    # Estimates for agents without truth cannot be scored; they are listed, not dropped silently.
    without_truth = sorted(result_agents - set(tw.index))
    tw = tw.loc[[a for a in tw.index if a in result_agents]]
    if len(tw) == 0:
        raise EvaluationError(f"{benchmark}: no agent has both truth and estimates")

    estimators: dict[str, Any] = {}
    scores: dict[str, EstimatorScore] = {}
    halves = split_agents(tw.index, cfg.split, benchmark)
    half_scores: dict[str, dict[str, EstimatorScore]] = {h: {} for h in HALVES}
    loo = results[results["estimator"] == cfg.loo_mean_estimator]
    loo_mean = loo.pivot(index="agent_id", columns="rating", values="estimate") if len(loo) else None
    for name, group in results.groupby("estimator", sort=True):
        ew = group.pivot(index="agent_id", columns="rating", values="estimate")
        missing = [r for r in ratings if r not in ew.columns]
        if missing:
            raise EvaluationError(f"{benchmark}: estimator {name!r} has no estimates for rating(s) {missing}")
        score = score_estimator(
            name,
            ew,
            tw,
            ratings,
            resamples=cfg.bootstrap_resamples,
            seed=cfg.seed,
            confidence=cfg.confidence,
            collapse_spread_ratio=cfg.collapse_spread_ratio,
            loo_mean=None if name == cfg.loo_mean_estimator else loo_mean,
            loo_mean_flag=cfg.loo_mean_flag,
        )
        scores[name] = score
        for h in HALVES:
            half_scores[h][name] = score_estimator(
                name, ew, tw.loc[halves[h]], ratings, resamples=cfg.bootstrap_resamples, seed=cfg.seed,
                confidence=cfg.confidence, collapse_spread_ratio=cfg.collapse_spread_ratio)
        info = (estimator_info or {}).get(name, {})
        entry: dict[str, Any] = {r: {k: score.per_rating[r].get(k) for k in PER_RATING_KEYS} for r in ratings}
        half_accuracy: dict[str, dict[str, Any]] = {r: {} for r in ratings}
        for r in ratings:
            table = interval_table(group, tw, r, cfg.confidence)
            cov = interval_coverage(group, tw, r, cfg.confidence, table=table)
            entry[r].update(_interval_entry(cov))
            # every pair judged as the nightly job judges a new agent, calibrated on the others
            pairs = pair_verdicts(ew[r].dropna().to_dict(), tw[r].to_dict(), cfg.confidence)
            entry[r]["verdicts"] = {k: verdict_accuracy(pairs)[k] for k in VERDICT_KEYS}
            for h in HALVES:
                half_accuracy[r][h] = {**_interval_entry(interval_coverage(group, tw, r, cfg.confidence, halves[h], table)),
                                       "verdicts": {k: verdict_accuracy(pairs, halves[h])[k] for k in VERDICT_KEYS}}
        for s in STATS:
            entry[f"mean_{s}"] = score.means[s]
            entry[f"mean_{s}_ci95"] = score.mean_ci[s]
        for r in ratings:
            entry[r][SPLIT_KEY] = {h: {**{k: half_scores[h][name].per_rating[r].get(k) for k in
                                          ("pearson", "spearman", "kendall", "pearson_ci95")}, **half_accuracy[r][h]}
                                   for h in HALVES}
        entry[SPLIT_KEY] = {h: _half_entry(half_scores[h][name]) for h in HALVES}
        entry["regime"] = list(info.get("regime") or _split_set(group["regime"]))
        entry["labels"] = {**_merge_labels(group["labels"]), **(info.get("labels") or {})}
        entry["n_agents"] = len(score.agents)
        entry["flags"] = list(score.flags)
        stuck = not_converged(group)
        entry["not_converged"] = stuck
        if stuck:
            entry["flags"].append(
                f"the solver did not converge for {len(stuck)} of {group['agent_id'].nunique()} agent(s): "
                f"{', '.join(stuck)} (their estimates are the last iterate, not a solution)"
            )
        estimators[name] = entry

    lookup = {
        (e, a, r): v
        for e, a, r, v in zip(results["estimator"], results["agent_id"], results["rating"], results["estimate"])
    }
    agents: dict[str, Any] = {}
    for agent in tw.index:
        per: dict[str, Any] = {}
        for r in ratings:
            cell: dict[str, Any] = {"truth": float(tw.loc[agent, r])}
            for name in estimators:
                v = lookup.get((name, agent, r))
                cell[name] = None if v is None or not math.isfinite(v) else float(v)
            per[r] = cell
        agents[agent] = per

    agent_intervals = {}
    if cfg.enigma_estimator in estimators:
        group = results[results["estimator"] == cfg.enigma_estimator]
        for r in ratings:
            table = interval_table(group, tw, r, cfg.confidence)
            agent_intervals[r] = {
                a: {"truth": row.truth, "estimate": row.estimate,
                    "sampling": None if pd.isna(row.interval_low) else [row.interval_low, row.interval_high],
                    "conformal": [row.conformal_low, row.conformal_high],
                    "calibrated": None if pd.isna(row.calibrated_low) else [row.calibrated_low, row.calibrated_high]}
                for a, row in table.iterrows()
            }

    ranking = rank(scores, cfg.rank_by)
    comparison = comparisons(ranking, scores, cfg)
    split_ranking = {h: rank(half_scores[h], cfg.rank_by) for h in HALVES}
    split_comparison = {h: comparisons(split_ranking[h], half_scores[h], cfg) for h in HALVES}
    # the question of the README's table and of the headline: ENIGMA against the best other estimator
    for where, order, sc in [*((split_comparison[h], split_ranking[h], half_scores[h]) for h in HALVES),
                             (comparison, ranking, scores)]:
        pair = enigma_minus_best_other(order, sc, cfg)
        if pair:
            where["enigma_minus_best_other"] = pair
    errors = [
        {"estimator": row.estimator, "agent_id": row.agent_id, "error": row.error}
        for row in results.drop_duplicates(["estimator", "agent_id"]).itertuples(index=False)
        if isinstance(row.error, str) and row.error
    ]
    summary = {
        "benchmark": benchmark,
        "n_agents": int(len(tw)),
        "ratings": ratings,
        "estimators": estimators,
        "agents": agents,
        # the report's ENIGMA estimator: each agent's calibrated, sampling and conformal interval (intervals.py)
        "agent_intervals": {"estimator": cfg.enigma_estimator, "ratings": agent_intervals} if agent_intervals else None,
        "ranking": [
            {"estimator": n, cfg.rank_by: scores[n].means[cfg.rank_by[5:]], "flags": len(scores[n].flags)} for n in ranking
        ],
        "comparison": comparison,
        # the dev and test halves of the agents (evaluation.split): the test half leads
        "splits": halves,
        "split_ranking": {
            h: [{"estimator": n, cfg.rank_by: half_scores[h][n].means[cfg.rank_by[5:]]} for n in split_ranking[h]]
            for h in HALVES
        },
        "split_comparison": split_comparison,
        "headline": " ".join([split_headline(halves, split_ranking, half_scores, split_comparison, cfg),
                              headline(benchmark, ranking, scores, comparison, cfg)]),
        # the same, as the table the report page leads with: a row per half and for all agents
        "headline_table": headline_table(halves, split_ranking, half_scores, split_comparison, ranking, scores,
                                         comparison, cfg),
        "errors": errors,
        "agents_without_truth": without_truth,
        "truth_reliability": truth_reliability(truth, list(tw.index), ratings),
        "settings": {
            "bootstrap_resamples": cfg.bootstrap_resamples,
            "seed": cfg.seed,
            "confidence": cfg.confidence,
            "collapse_spread_ratio": cfg.collapse_spread_ratio,
            "loo_mean_estimator": cfg.loo_mean_estimator,
            "loo_mean_flag": cfg.loo_mean_flag,
            "rank_by": cfg.rank_by,
            "split": {**cfg.split.model_dump(), "rule": "agents ordered by sha256('<salt>:<agent_id>'); "
                      "the first round(n * test_share) are the test half"},
            "interval": "percentile bootstrap, agents resampled with replacement, the same resamples for every rating",
            "agent_interval": {
                "sampling": "the estimator's own interval of each estimate (ENIGMA: the dialogue bootstrap, refitted per resample)",
                "conformal": "estimate +- the ceil((n+1) confidence)-th smallest absolute residual of the n other agents",
                "calibrated": "the n other agents' linear recalibration a + b estimate +- the ceil((n+1) confidence)-th "
                              "smallest absolute residual of that fit; below 19 agents (at 95%) a normal prediction interval",
            },
            "default_interval": "calibrated",
            "verdicts": "every pair of agents i, j: b (e_i - e_j) of the recalibration on the other agents against the "
                        "confidence quantile of |r_k - r_l| over their pairs; wrong = called against the sign of the true "
                        "gap; power_gap_0_05 = share of pairs with |true gap| > 0.05 called the right way",
        },
    }
    return _num(summary), scores


def _interval_entry(cov: dict[str, Any]) -> dict[str, Any]:
    kinds = {k: cov[k] for k in KINDS}
    return {"interval_coverage": {k: v and v["coverage"] for k, v in kinds.items()},
            "interval_mean_width": {k: v and v["mean_width"] for k, v in kinds.items()},
            "interval_missed": {k: v and v["missed"] for k, v in kinds.items()}}


def _half_entry(score: EstimatorScore) -> dict[str, Any]:
    out: dict[str, Any] = {"n_agents": len(score.agents)}
    for s in STATS:
        out[f"mean_{s}"] = score.means[s]
        out[f"mean_{s}_ci95"] = score.mean_ci[s]
    return out


def truth_reliability(truth: pd.DataFrame, agents: list[str], ratings: list[str]) -> dict[str, Any]:
    """How much of the spread of the true values across agents is real rather than sampling
    noise in them: reliability = 1 - mean(stderr^2) / var(values), and sqrt(reliability), the
    Pearson correlation that a perfect estimator could expect against these noisy values.
    Simulator truth with tiny standard errors gives reliability near 1; See 2019's per-agent
    means (about 100 ratings each) noticeably less."""
    out: dict[str, Any] = {}
    t = truth[truth["agent_id"].isin(agents)]
    for r in ratings:
        sub = t[t["rating"] == r]
        var = float(sub["value"].var(ddof=1)) if len(sub) > 1 else float("nan")
        se = sub["stderr"].to_numpy(dtype=float)
        entry: dict[str, Any] = {"std": math.sqrt(var) if var == var else None, "mean_stderr": None,
                                 "reliability": None, "max_pearson": None}
        if len(se) and np.isfinite(se).all() and var > 0:
            rel = 1.0 - float(np.mean(se**2)) / var
            entry.update(mean_stderr=float(se.mean()), reliability=rel, max_pearson=math.sqrt(rel) if rel > 0 else 0.0)
        out[r] = entry
    return out
