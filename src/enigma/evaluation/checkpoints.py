"""The report of a checkpoint benchmark: how well each estimator, scoring the checkpoints as the
nightly job does, tells their true values.

Per estimator and rating, over the checkpoints:
- Pearson, Spearman and the mean absolute error of the estimates against the truth;
- the calibrated interval, fitted on the ``scored_on`` store's agents (their leave-one-agent-out
  estimates against their mean ratings, as the nightly job calibrates): its coverage of the
  truth, its mean width, and the calibrated estimate's mean absolute error;
- the nightly verdict (``calibration.verdict``) over every pair of checkpoints and over
  consecutive checkpoints of one training run (the nightly question: is tonight's checkpoint
  better than last night's?): called, wrong, and the power at a true gap above 0.05.

Per checkpoint, beside its truth: how much of its sample at the logged states was degenerate or
cut at the length limit (``enigma.sampling.degenerate``), and how many of its kept on-policy
dialogues it never ended with an action (what the benchmark's pipeline counts, by the simulator's
rule): an early checkpoint is scored as it is, and the page says how much of it was not a reply.

``summary.json`` holds every figure; ``index.md``/``index.html`` lead with a table per rating.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from enigma.evaluation import calibration as calib
from enigma.evaluation.correlation import correlations


def consecutive_pairs(names: list[str], runs: dict[str, str], steps: dict[str, int]) -> list[tuple[str, str]]:
    """(later, earlier) for each checkpoint and the one saved before it in the same run."""
    out = []
    for run in dict.fromkeys(runs[n] for n in names):
        ordered = sorted((n for n in names if runs[n] == run), key=lambda n: steps[n])
        out += [(b, a) for a, b in zip(ordered, ordered[1:])]
    return out


def rating_figures(estimates: dict[str, float], truths: dict[str, float], cal: calib.Calibration,
                   consecutive: list[tuple[str, str]], level: float) -> dict[str, Any]:
    names = [n for n in truths if n in estimates and math.isfinite(estimates[n])]
    e = np.array([estimates[n] for n in names])
    t = np.array([truths[n] for n in names])
    out: dict[str, Any] = {"n_checkpoints": len(names), "missing": sorted(set(truths) - set(names))}
    if not names:
        return out
    out.update(correlations(e, t))
    out["mae"] = float(np.mean(np.abs(e - t)))
    out["estimates_range"] = [float(e.min()), float(e.max())]
    out["truth_range"] = [float(t.min()), float(t.max())]
    if cal.n >= 3:
        ivs = {n: dict(zip(("low", "high", "how"), calib.interval(cal, estimates[n], level))) for n in names}
        acc = calib.interval_accuracy(ivs, truths)
        out["calibrated"] = {"coverage": acc and acc["coverage"], "mean_width": acc and acc["mean_width"],
                             "missed": acc and acc["missed"], "how": next(iter(ivs.values()))["how"],
                             "calibration_agents": cal.n, "a": cal.a, "b": cal.b,
                             "mae": float(np.mean([abs(cal.calibrated(estimates[n]) - truths[n]) for n in names]))}
        every = [(i, j) for k, i in enumerate(names) for j in names[k + 1:]]
        allv = [calib.judged_pair(cal, estimates, truths, i, j, level) for i, j in every]
        nightly = [calib.judged_pair(cal, estimates, truths, i, j, level) for i, j in consecutive
                   if i in names and j in names]
        out["verdicts_all_pairs"] = calib.verdict_accuracy(allv)
        out["verdicts_consecutive"] = calib.verdict_accuracy(nightly)
        out["consecutive"] = [{"later": i, "earlier": j, "verdict": v["verdict"], "true_gap": v["gap"]}
                              for (i, j), v in zip([p["agents"] for p in nightly], nightly)]
    return out


def build_summary(truth_path: str | Path, results_dir: str | Path, calibration_results: str | Path, store,
                  estimators: dict[str, str], record: dict[str, dict], level: float, note: str | None,
                  scored_on: str, replies: dict[str, dict] | None = None) -> dict[str, Any]:
    """Every figure of the report (see the module docstring); ``estimators``: each estimator's
    params name -> the name its results are filed under; ``replies``: per checkpoint, its sample's
    ``degenerate`` counts and ``no_action`` of ``kept_dialogues``."""
    from enigma.pipeline.compare import calibration_residuals, scored_agents

    truth = pq.read_table(truth_path).to_pylist()
    ratings = list(dict.fromkeys(r["rating"] for r in truth))
    names = list(dict.fromkeys(r["agent_id"] for r in truth))
    runs = {n: record[n]["mix"] for n in names}
    steps = {n: record[n]["step"] for n in names}
    consecutive = consecutive_pairs(names, runs, steps)
    truths = {r: {x["agent_id"]: x["value"] for x in truth if x["rating"] == r} for r in ratings}
    out: dict[str, Any] = {
        "scored_on": scored_on, "note": note, "level": level, "ratings": ratings,
        "checkpoints": [{"name": n, **record[n], "truth": {r: truths[r][n] for r in ratings},
                         "truth_stderr": {x["rating"]: x["stderr"] for x in truth if x["agent_id"] == n},
                         "truth_dialogues": next(x["n"] for x in truth if x["agent_id"] == n),
                         **({"replies": replies[n]} if replies and n in replies else {})} for n in names],
        "estimators": {},
    }
    for est, filed in estimators.items():
        per: dict[str, Any] = {}
        for r in ratings:
            scored = scored_agents(results_dir, filed, names, r)
            estimates = {n: s["estimate"] for n, s in scored.items()}
            c = calibration_residuals(calibration_results, filed, store, r)
            cal = calib.fit(list(c["estimates"].values()), [c["truths"][a] for a in c["estimates"]], list(c["estimates"]))
            per[r] = {"estimates": estimates, **rating_figures(estimates, truths[r], cal, consecutive, level),
                      **({"why_not_calibrated": c["why"]} if c.get("why") else {})}
        out["estimators"][est] = per
    return out


def _f(v: Any, digits: int = 3) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{digits}f}"


def _calls(acc: dict[str, Any] | None) -> str:
    if not acc:
        return "n/a"
    power = "n/a" if acc["power_gap_0_05"] is None else f"{100 * acc['power_gap_0_05']:.0f}%"
    return f"{acc['called']}/{acc['pairs']} called, {acc['wrong']} wrong, power {power}"


def markdown(s: dict[str, Any], title: str) -> str:
    lines = [f"# {title}", ""]
    if s["note"]:
        lines += [f"> {s['note']}", ""]
    n = len(s["checkpoints"])
    lines += [f"{n} checkpoints of a small language model, each scored on the `{s['scored_on']}` store as the nightly "
              f"job scores a new agent, against its truth from on-policy play with the simulator's customer. "
              f"Intervals and verdicts at {100 * s['level']:.0f}%, calibrated on the `{s['scored_on']}` sellers' "
              "leave-one-agent-out results. Every figure, with each checkpoint's estimates: "
              "[summary.json](summary.json).", ""]
    for r in s["ratings"]:
        lines += [f"## {r}", "", "| estimator | Pearson | Spearman | MAE | calibrated MAE | coverage | width | "
                  "verdicts, all pairs | verdicts, consecutive |", "|---|---|---|---|---|---|---|---|---|"]
        for est, per in s["estimators"].items():
            f = per[r]
            cal = f.get("calibrated") or {}
            lines.append(f"| {est} | {_f(f.get('pearson'))} | {_f(f.get('spearman'))} | {_f(f.get('mae'))} | "
                         f"{_f(cal.get('mae'))} | {_f(cal.get('coverage'), 2)} | {_f(cal.get('mean_width'))} | "
                         f"{_calls(f.get('verdicts_all_pairs'))} | {_calls(f.get('verdicts_consecutive'))} |")
        lines.append("")
    flagged = any("replies" in c for c in s["checkpoints"])
    lines += ["## The checkpoints", ""]
    if flagged:
        lines += ["Each checkpoint is scored on its replies as it gave them. *Degenerate*: empty or one word over and "
                  "over; *cut*: stopped at the length limit (max_new_tokens) before the model ended the reply; both "
                  "among its replies at the logged states. *No action*: its kept on-policy dialogues with the "
                  "customer in which it never took the final action.", ""]
    extra = " degenerate | cut | no action |" if flagged else ""
    lines += ["| checkpoint | mix | step | train loss | " + " | ".join(f"true {r}" for r in s["ratings"])
              + " | dialogues |" + extra, "|---|---|---|---|" + "---|" * len(s["ratings"]) + "---|"
              + "---|---|---|" * flagged]
    for c in s["checkpoints"]:
        lines.append(f"| {c['name']} | {c['mix']} | {c['step']} | {_f(c['train_loss'])} | "
                     + " | ".join(f"{_f(c['truth'][r])} ± {_f(c['truth_stderr'][r])}" for r in s["ratings"])
                     + f" | {c['truth_dialogues']} |" + (_replies_cells(c.get("replies")) if flagged else ""))
    lines.append("")
    return "\n".join(lines)


def _replies_cells(got: dict[str, Any] | None) -> str:
    """`` 12% | 40% | 3/20 |``: the checkpoint's degenerate and cut shares and its no-action dialogues."""
    if not got:
        return " n/a | n/a | n/a |"
    bad = got.get("degenerate")

    def pct(k: int | None) -> str:
        return "n/a" if bad is None or k is None or not bad["replies"] else f"{100 * k / bad['replies']:.0f}%"

    degenerate = None if bad is None else bad["empty"] + bad["repeated"]
    cut = None if bad is None else bad.get("at_token_limit")
    return f" {pct(degenerate)} | {pct(cut)} | {got['no_action']}/{got['kept_dialogues']} |"


def write_report(summary: dict[str, Any], out_dir: str | Path, title: str) -> Path:
    from enigma.pipeline.compare import html
    from enigma.writes import write_text

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(summary, title)
    write_text(out / "summary.json", json.dumps(summary, indent=1, sort_keys=True, default=list) + "\n")
    write_text(out / "index.md", md)
    write_text(out / "index.html", html(md, title))
    return out / "index.html"
