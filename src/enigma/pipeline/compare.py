"""Is the new checkpoint better? The nightly job's comparison of a new agent with the registry.

For each new agent and estimator, on one rating (``nightly.compare_rating``), everything
calibrated on the store's own agents, each estimated leave-one-agent-out
(``nightly.calibration_results``) against its mean rating in the store:

- the estimate with its **calibrated interval** (``enigma.evaluation.calibration``: the store's
  agents' recalibration of the estimate plus or minus a quantile of their residuals, named with
  how it was made and on how many agents), its **sampling interval** (the estimator's own:
  ENIGMA's dialogue bootstrap, blind to its bias) and its **conformal interval**
  (``enigma.evaluation.intervals``);
- its **rank** among the registry's agents scored so far (tonight's and earlier nights');
- the **verdict** against the best of the others (the incumbent), by ``calibration.verdict``: the
  calibrated difference against the quantile of the store's agents' residual differences, with
  that rule's measured accuracy on the store's own pairs (wrong-direction rate and power, by the
  same code as the report's ``verdicts``);
- as an extra, labelled *sampling only*, the **paired bootstrap difference**: the two estimates
  come from the same logged dialogues and, with the same seed, the same bootstrap resamples, so
  the difference of their resampled estimates gives its interval. Where the draws cannot be
  paired (another store, another estimator without draws) the comparison says why.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from enigma.evaluation import calibration as calib
from enigma.evaluation.intervals import conformal_halfwidth, interval_text
from enigma.evaluation.errors import EvaluationError
from enigma.evaluation.results import artifact_path, read_results, result_path
from enigma.ope.bootstrap import percentile_interval
from enigma.store.experience import ExperienceStore


def store_means(store: ExperienceStore, rating: str) -> pd.Series:
    """Each agent's mean rating in the store: the observed truth the calibration is measured on."""
    df = pd.DataFrame({"agent": store.dialogues.column("agent_id").to_pylist(), "value": store.ratings(rating)})
    return df.dropna().groupby("agent")["value"].mean()


def calibration_residuals(results_dir: str | Path | None, estimator: str, store: ExperienceStore, rating: str,
                          level: float | None = None) -> dict[str, Any]:
    """The store's agents' leave-one-agent-out estimates and mean ratings (``estimates``,
    ``truths``), their absolute residuals, or why there are none (no results directory, or no
    results of this estimator for the store's agents). With ``level``: also the store's
    ``accuracy`` of the calibrated interval and of the verdict rule, measured on its own agents
    and pairs as the report measures them (``calibration.calibrated_intervals``, ``pair_verdicts``)."""
    if results_dir is None:
        return {"residuals": [], "estimates": {}, "truths": {},
                "why": "no calibration results configured (nightly.calibration_results)"}
    path = Path(results_dir)
    if not path.is_dir():
        return {"residuals": [], "estimates": {}, "truths": {},
                "why": f"calibration results {path} not found (run the benchmark's train stage first)"}
    try:
        res = read_results(path)
    except EvaluationError as exc:  # e.g. a train stage interrupted before its first result: score, say why
        return {"residuals": [], "estimates": {}, "truths": {}, "why": f"calibration results unusable: {exc}"}
    res = res[(res["estimator"] == estimator) & (res["rating"] == rating) & res["error"].isna()]
    truth = store_means(store, rating)
    both = res[res["agent_id"].isin(truth.index)]
    est = {a: float(e) for a, e in zip(both["agent_id"], both["estimate"])}
    truths = {a: float(truth[a]) for a in est}
    resid = [abs(e - truths[a]) for a, e in est.items()]
    why = None if resid else f"{path} has no {estimator} estimates of {rating} for the store's agents"
    out = {"residuals": resid, "estimates": est, "truths": truths, "why": why, "source": str(path)}
    if level is not None:
        out["accuracy"] = store_accuracy(est, truths, level)
    return out


def store_accuracy(estimates: dict[str, float], truths: dict[str, float], level: float) -> dict[str, Any]:
    """How the calibrated interval and the verdict rule fare on the store's own agents: coverage
    and mean width of each agent's interval calibrated on the others, and ``verdicts`` over every
    pair calibrated on the others (the report's ``verdicts``)."""
    cov = calib.interval_accuracy(calib.calibrated_intervals(estimates, truths, level), truths)
    acc = calib.verdict_accuracy(calib.pair_verdicts(estimates, truths, level))
    return {"coverage": cov and cov["coverage"], "mean_width": cov and cov["mean_width"], "verdicts": acc}


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
    # the new agent is not among the calibration agents (if a store agent is re-scored, it is left out)
    cal = calib.fit_without(calibration.get("estimates", {}), calibration.get("truths", {}), [agent])
    lo, hi, how = calib.interval(cal, me["estimate"], level)
    order = sorted(scored, key=lambda n: -scored[n]["estimate"])
    out: dict[str, Any] = {
        "rating": rating,
        "estimate": me["estimate"],
        "interval": None if lo is None else [lo, hi],
        "interval_kind": "calibrated" if lo is not None else "none",
        "calibration": {"calibration_agents": cal.n, "how": how if cal.n else calibration.get("why") or how,
                        "calibrated_estimate": cal.calibrated(me["estimate"]) if cal.n else None,
                        "a": cal.a, "b": cal.b, "note": cal.note, "source": calibration.get("source"),
                        "accuracy": calibration.get("accuracy")},
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
    v = calib.verdict(cal, me["estimate"], scored[inc]["estimate"], level)
    cmp: dict[str, Any] = {"incumbent": inc, "incumbent_estimate": scored[inc]["estimate"],
                           "verdict": v["verdict"] if cal.n else "no calibration",
                           "calibrated_difference": v["difference"], "threshold": v["threshold"], "how": v["how"],
                           "accuracy": (calibration.get("accuracy") or {}).get("verdicts"),
                           # the paired bootstrap: the noise of the logs only, blind to the estimator's bias
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
    cmp["sampling_only_verdict"] = ("better" if iv and iv[0] > 0 else "worse" if iv and iv[1] < 0 else
                                    "not distinguishable" if iv else "no paired interval")
    out["comparison"] = cmp
    return out


def _fmt(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.3f}"


def markdown(report: dict[str, Any]) -> str:
    """The nightly report a team reads over coffee."""
    lines = [f"# Nightly evaluation {report['run']}", "",
             f"Store: `{report['store']}`; registry: `{report['registry']}`. The **interval** ({report['level']:.0%}) and the "
             "**verdict** are calibrated on the store's own agents, each estimated with itself held out: the interval "
             "covers the estimator's error, bias included, and the verdict weighs the difference with the incumbent against "
             "the errors the estimator makes on differences between the store's agents. Beside each verdict: how often that "
             "rule pointed the wrong way, and how often it called a true gap over 0.05, on the store's own pairs. "
             "*Sampling only* (the dialogue bootstrap, and the paired difference of its draws) covers the noise of the logs, "
             "not the estimator's bias.", ""]
    for name, info in sorted(report["agents"].items()):
        lines.append(f"## {name}: {info['status']}")
        lines.append("")
        if info["errors"]:
            lines += [f"- failed at {step}: {why}" for step, why in info["errors"].items()] + [""]
        bad = info.get("degenerate")
        if bad and (bad["share"] > 0 or bad.get("at_token_limit")):
            from enigma.sampling.degenerate import DegenerateReplies

            lines += ["- " + DegenerateReplies.from_dict(bad).sentence(), ""]
        for est, c in sorted((info.get("comparison") or {}).items()):
            if c.get("error"):
                lines += [f"- {est}: {c['error']}", ""]
                continue
            cal = c.get("calibration") or {}
            level = f" ({c['sampling_level']:.0%})" if c.get("sampling_level") else ""
            lines.append(f"- **{est}**, {c['rating']}: **{_fmt(c['estimate'])}**, calibrated interval "
                         f"**{interval_text(c.get('interval'))}** ({cal.get('how')}; calibrated estimate "
                         f"{_fmt(cal.get('calibrated_estimate'))}, from `{cal.get('source')}`)")
            acc = cal.get("accuracy") or {}
            if acc.get("coverage") is not None:
                lines.append(f"- that interval on the store's own agents: coverage {acc['coverage']:.2f}, mean width "
                             f"{_fmt(acc['mean_width'])}")
            lines.append(f"- sampling only{level} {interval_text(c['sampling_interval'])}; conformal "
                         f"{interval_text(c['conformal_interval'])}"
                         + (f" ({c['conformal']['why_none']})" if c["conformal_interval"] is None else
                            f" ({c['conformal']['calibration_agents']} calibration agents)"))
            lines.append(f"- rank {c['rank']} of {c['ranked']} registry agents scored so far")
            cmp = c.get("comparison")
            if cmp:
                lines.append(f"- against the incumbent **{cmp['incumbent']}** ({_fmt(cmp['incumbent_estimate'])}): "
                             f"calibrated difference {_signed(cmp.get('calibrated_difference'))} against a threshold of "
                             f"{_fmt(cmp.get('threshold'))} ({cmp.get('how')}): **{cmp['verdict']}**; "
                             + _accuracy_text(cmp.get("accuracy")))
                iv = interval_text(cmp["interval"]) if cmp["interval"] else cmp.get("why_no_interval", "no interval")
                lines.append(f"- sampling only: {cmp['difference']:+.3f}, paired bootstrap interval {iv}: "
                             f"{cmp['sampling_only_verdict']} (blind to the estimator's bias)")
            else:
                lines.append("- no other registry agent scored yet: nothing to compare with")
            lines.append("")
    if report["failed"]:
        lines += [f"Failed tonight: {', '.join(report['failed'])} (retried next night).", ""]
    return "\n".join(lines)


def _signed(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:+.3f}"


def _accuracy_text(acc: dict[str, Any] | None) -> str:
    """The verdict rule's measured accuracy on the store's own pairs, in words."""
    if not acc or not acc.get("pairs"):
        return "the rule's accuracy on this store: not measured (no calibration pairs)"
    wrong = "none called" if not acc["called"] else f"{acc['wrong_rate']:.1%} wrong direction ({acc['wrong']} of {acc['called']} called)"
    power = ("no pair with a true gap over 0.05" if acc["power_gap_0_05"] is None else
             f"power {acc['power_gap_0_05']:.0%} at true gaps over 0.05")
    return f"this rule on the store's {acc['pairs']} pairs of agents: {wrong}, {power}"


def html(md: str, title: str) -> str:
    """The Markdown report as a standalone HTML page."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark").enable("table").render(md)  # the checkpoint report's tables
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>"
            "<style>body{font-family:sans-serif;margin:2em;max-width:60em}</style></head><body>" + body + "</body></html>\n")
