"""Is the new checkpoint better? The nightly job's comparison of a new agent with the registry.

For each new agent and estimator, on one rating (``nightly.compare_rating``):

- the estimate with its **sampling interval** (the estimator's own: ENIGMA's dialogue bootstrap)
  and its **conformal interval**: the estimate plus or minus a quantile of the absolute residuals
  of the store's own agents, each estimated leave-one-agent-out (``nightly.calibration_results``)
  against its mean rating in the store (``enigma.evaluation.intervals``);
- its **rank** among the registry's agents scored so far (tonight's and earlier nights');
- a **paired difference** with the best of the others (the incumbent): the two estimates come
  from the same logged dialogues and, with the same seed, the same bootstrap resamples, so the
  difference of their resampled estimates gives its interval. Where the draws cannot be paired
  (another store, another estimator without draws) the comparison says why.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from enigma.evaluation.intervals import conformal_halfwidth, interval_text
from enigma.evaluation.results import artifact_path, read_results, result_path
from enigma.ope.bootstrap import percentile_interval
from enigma.store.experience import ExperienceStore


def store_means(store: ExperienceStore, rating: str) -> pd.Series:
    """Each agent's mean rating in the store: the observed truth the calibration is measured on."""
    df = pd.DataFrame({"agent": store.dialogues.column("agent_id").to_pylist(), "value": store.ratings(rating)})
    return df.dropna().groupby("agent")["value"].mean()


def calibration_residuals(results_dir: str | Path | None, estimator: str, store: ExperienceStore, rating: str) -> dict[str, Any]:
    """The absolute residuals of the store's agents' leave-one-agent-out estimates, or why there
    are none (no results directory, or no results of this estimator for the store's agents)."""
    if results_dir is None:
        return {"residuals": [], "why": "no calibration results configured (nightly.calibration_results)"}
    path = Path(results_dir)
    if not path.is_dir():
        return {"residuals": [], "why": f"calibration results {path} not found (run the benchmark's train stage first)"}
    res = read_results(path)
    res = res[(res["estimator"] == estimator) & (res["rating"] == rating) & res["error"].isna()]
    truth = store_means(store, rating)
    both = res[res["agent_id"].isin(truth.index)]
    resid = [abs(float(e) - float(truth[a])) for a, e in zip(both["agent_id"], both["estimate"])]
    why = None if resid else f"{path} has no {estimator} estimates of {rating} for the store's agents"
    return {"residuals": resid, "why": why, "source": str(path)}


def load_draws(results_dir: str | Path, estimator: str, agent: str) -> dict[str, Any] | None:
    """The bootstrap draws saved beside a result (``<agent>.bootstrap.pt``), or None."""
    path = artifact_path(results_dir, estimator, agent, "bootstrap")
    if not path.is_file():
        return None
    import torch

    return torch.load(path, weights_only=True)


def scored_agents(results_dir: str | Path, estimator: str, names: list[str], rating: str) -> dict[str, dict[str, Any]]:
    """The registry agents with a finished result of ``estimator``: estimate and sampling interval."""
    out = {}
    for name in names:
        path = result_path(results_dir, estimator, name)
        if not path.is_file():
            continue
        rows = [r for r in json.loads(path.read_text())["rows"] if r["rating"] == rating and not r.get("error")]
        if rows:
            r = rows[0]
            lo, hi = r.get("interval_low"), r.get("interval_high")
            diag = json.loads(r.get("diagnostics") or "{}")
            levels = [v["bootstrap"]["level"] for v in diag.values() if isinstance(v, dict) and "bootstrap" in v]
            out[name] = {"estimate": float(r["estimate"]), "sampling": None if lo is None or hi is None else [lo, hi],
                         "sampling_level": levels[0] if levels else None}
    return out


def compare_agent(
    agent: str,
    estimator: str,
    results_dir: str | Path,
    registry: list[str],
    earlier: set[str],
    calibration: dict[str, Any],
    rating: str,
    level: float,
) -> dict[str, Any]:
    """Everything the nightly report says of one new agent under one estimator."""
    scored = scored_agents(results_dir, estimator, registry, rating)
    if agent not in scored:
        return {"rating": rating, "error": f"no {rating} estimate of {agent}"}
    me = scored[agent]
    h = conformal_halfwidth(calibration["residuals"], level) if calibration["residuals"] else math.inf
    conformal = None if not calibration["residuals"] else [me["estimate"] - h, me["estimate"] + h]
    order = sorted(scored, key=lambda n: -scored[n]["estimate"])
    out: dict[str, Any] = {
        "rating": rating,
        "estimate": me["estimate"],
        "sampling_interval": me["sampling"],
        "sampling_level": me["sampling_level"],
        "conformal_interval": conformal if conformal is None or math.isfinite(h) else [None, None],
        "conformal": {"calibration_agents": len(calibration["residuals"]), "why_none": calibration.get("why"),
                      "source": calibration.get("source")},
        "rank": order.index(agent) + 1,
        "ranked": len(order),
        "ranking": [{"agent": n, "estimate": scored[n]["estimate"]} for n in order],
    }
    # the incumbent: the best of the agents scored on earlier nights, else of tonight's others
    others = [n for n in order if n != agent and n in earlier] or [n for n in order if n != agent]
    if not others:
        out["comparison"] = None
        return out
    inc = others[0]
    cmp: dict[str, Any] = {"incumbent": inc, "incumbent_estimate": scored[inc]["estimate"],
                           "difference": me["estimate"] - scored[inc]["estimate"], "interval": None}
    mine, theirs = load_draws(results_dir, estimator, agent), load_draws(results_dir, estimator, inc)
    if mine is None or theirs is None:
        cmp["why_no_interval"] = f"{estimator} saved no bootstrap draws for {agent if mine is None else inc}"
    elif (mine["n_dialogues"], mine["seed"]) != (theirs["n_dialogues"], theirs["seed"]) or rating not in mine["draws"]:
        cmp["why_no_interval"] = "the two were not scored on the same logs and resamples"
    else:
        a, b = np.asarray(mine["draws"][rating]), np.asarray(theirs["draws"][rating])
        if len(a) == len(b):
            cmp["interval"] = percentile_interval(a - b, level)
            cmp["resamples"] = len(a)
        else:
            cmp["why_no_interval"] = "different numbers of resamples"
    iv = cmp["interval"]
    cmp["verdict"] = ("better" if iv and iv[0] > 0 else "worse" if iv and iv[1] < 0 else
                      "not distinguishable" if iv else "no paired interval")
    out["comparison"] = cmp
    return out


def _fmt(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.3f}"


def markdown(report: dict[str, Any]) -> str:
    """The nightly report a team reads over coffee."""
    lines = [f"# Nightly evaluation {report['run']}", "",
             f"Store: `{report['store']}`; registry: `{report['registry']}`. *Sampling* intervals cover the noise of the "
             "logs and of the target's replies (dialogue bootstrap, at the estimator's level); *conformal* intervals "
             f"({report['level']:.0%}) add the estimator's own error, measured on the store's agents held out in turn; "
             f"the paired difference with the incumbent is at {report['level']:.0%}.", ""]
    for name, info in sorted(report["agents"].items()):
        lines.append(f"## {name}: {info['status']}")
        lines.append("")
        if info["errors"]:
            lines += [f"- failed at {step}: {why}" for step, why in info["errors"].items()] + [""]
        for est, c in sorted((info.get("comparison") or {}).items()):
            if c.get("error"):
                lines += [f"- {est}: {c['error']}", ""]
                continue
            level = f" ({c['sampling_level']:.0%})" if c.get("sampling_level") else ""
            lines.append(f"- **{est}**, {c['rating']}: **{_fmt(c['estimate'])}**, sampling{level} {interval_text(c['sampling_interval'])}, "
                         f"conformal {interval_text(c['conformal_interval'])}"
                         + (f" ({c['conformal']['why_none']})" if c["conformal_interval"] is None else
                            f" ({c['conformal']['calibration_agents']} calibration agents)"))
            lines.append(f"- rank {c['rank']} of {c['ranked']} registry agents scored so far")
            cmp = c.get("comparison")
            if cmp:
                diff = f"{cmp['difference']:+.3f}"
                iv = interval_text(cmp["interval"]) if cmp["interval"] else cmp.get("why_no_interval", "no interval")
                lines.append(f"- against the incumbent **{cmp['incumbent']}** ({_fmt(cmp['incumbent_estimate'])}): "
                             f"{diff}, paired interval {iv}: **{cmp['verdict']}**")
            else:
                lines.append("- no other registry agent scored yet: nothing to compare with")
            lines.append("")
    if report["failed"]:
        lines += [f"Failed tonight: {', '.join(report['failed'])} (retried next night).", ""]
    return "\n".join(lines)


def html(md: str, title: str) -> str:
    """The Markdown report as a standalone HTML page."""
    from markdown_it import MarkdownIt

    body = MarkdownIt().render(md)
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>"
            "<style>body{font-family:sans-serif;margin:2em;max-width:60em}</style></head><body>" + body + "</body></html>\n")
