"""Issue 71's three-seed rules: a study's ``dev_rows.py`` result files per dev set and
``dice.seed`` (tagged ``dev_rows_<set>_<study>_s<seed>``), and what each rule reports beside its
D: the reward rating's residual after a leave-one-out linear recalibration (the quantity issue
71's first goal is stated in), the calibrated verdicts on the dev agents' pairs, and how far an
agent's estimate moves between seeds."""

from __future__ import annotations

import json
import math
import statistics as st
from typing import Any

from result_files import RESULTS

K0 = ["airline", "airline-seed1", "see2019"]
DELAYED = ["airline-delay3", "airline-delay8"]
SETS = K0 + DELAYED
SEEDS = [0, 1, 2]


def load(benchmark: str, study: str, seed: int | None = None) -> dict | None:
    """The result JSON of ``dev_rows.py --tag dev_rows_<set>_<study>[_s<seed>]``, or None if not run."""
    tag = f"dev_rows_{benchmark.replace('-', '_')}_{study}" + ("" if seed is None else f"_s{seed}")
    path = RESULTS / f"{tag}.json"
    return json.loads(path.read_text()) if path.exists() else None


def recalibrated(estimates: dict[str, float], truth: dict[str, float]) -> dict[str, Any]:
    """One rating's leave-one-out recalibration (the calibrated interval's fit): the residual's root
    mean square, the mean interval width and each agent's residual (truth minus calibrated)."""
    from enigma.evaluation.calibration import calibrated_intervals

    cal = calibrated_intervals(estimates, truth, 0.95)
    residual = {a: truth[a] - v["calibrated"] for a, v in cal.items()}
    return {"rms": math.sqrt(st.mean(r**2 for r in residual.values())),
            "width": st.mean(v["high"] - v["low"] for v in cal.values() if v["low"] is not None),
            "residual": residual}


def calibrated(estimates: dict[str, dict[str, float]], truth: "pd.DataFrame") -> dict:  # noqa: F821
    """The reward rating's recalibration residual (rms) and interval width and, over every rating,
    the calibrated verdicts on the agents' pairs (each pair calibrated on the other agents)."""
    from enigma.evaluation.calibration import pair_verdicts, verdict_accuracy

    agents = [a for a in truth.index if a in estimates]
    out: dict = {}
    pairs: list = []
    for rating in truth.columns:
        e = {a: estimates[a][rating] for a in agents if math.isfinite(estimates[a].get(rating, math.nan))}
        t = {a: float(truth.loc[a, rating]) for a in agents}
        if rating == "reward":
            r = recalibrated(e, t)
            out["reward_rms"], out["reward_width"] = r["rms"], r["width"]
        pairs += pair_verdicts(e, t, 0.95)
    acc = verdict_accuracy(pairs)
    out.update(power=acc["power_gap_0_05"], wrong=acc["wrong"], called=acc["called"], big=acc["pairs_gap_0_05"])
    return out


def seed_sd(runs: list[dict[str, dict[str, float]]], rating: str = "reward") -> float:
    """How far an agent's estimate moves between seeds: the root of the mean over agents of the
    (n − 1) variance of its estimates, one ``estimates`` dict per seed, the agents of the first."""
    agents = list(runs[0])
    return math.sqrt(st.mean(st.variance([run[a][rating] for run in runs]) for a in agents))


def correction_size(folder: "Path", dev: list[str]) -> float:  # noqa: F821
    """The mean over the dev agents and ratings of |dr - q| in the ENIGMA result files of one row
    (``folder``: the row's results, ``enigma/<agent>.json``): how far the ratio moved the Q's value."""
    from value_kinds_dev import dev_values

    from enigma.evaluation.results import read_results

    values = dev_values(read_results(folder), dev)
    return float((values["dr"] - values["q"]).abs().to_numpy().mean())


def gather(params: "Params", study: str, work: "Path | None" = None) -> dict[str, dict]:  # noqa: F821
    """Every (set, seed) run of ``study`` as ``{"<set>/s<seed>": {"code", <row>: {mean_pearson,
    spread, seconds_median, failed, D (against the first row), the ``calibrated``
    quantities, and with ``work`` (dev_rows' --work parent) the dr correction's size}}}``."""
    from dev_rows import dev_truth

    cells: dict = {}
    for b in SETS:
        for s in SEEDS:
            run = load(b, study, s)
            if run is None:
                continue
            truth = dev_truth(params, b, run["dev_agents"])
            cell = {"code": run["code"]}
            for name, row in run["rows"].items():
                cell[name] = {"mean_pearson": row["mean_pearson"], "spread": row["mean_spread_ratio"],
                              "seconds_median": row["seconds_per_agent_median"], "failed": row["failed_agents"],
                              **calibrated(row["estimates"], truth)}
                if work is not None:
                    cell[name]["correction"] = correction_size(work / f"s{s}" / b / name, run["dev_agents"])
            for name in run["paired"]:
                cell[name.split(" - ")[0]]["D"] = run["paired"][name]["pearson"]
            cells[f"{b}/s{s}"] = cell
    return cells


def d_bar(cells: dict[str, dict], benchmark: str, row: str) -> float | None:
    """A row's D on a set, averaged over the seeds; None until every seed has run."""
    ds = [cells[f"{benchmark}/s{s}"][row]["D"]["difference"] for s in SEEDS if f"{benchmark}/s{s}" in cells]
    return st.mean(ds) if len(ds) == len(SEEDS) else None


def row_lines(cells: dict[str, dict], rows: list[str], correction: bool = False) -> list[str]:
    """The per (set, seed, row) table: mean Pearson, D, spread, the reward residual and width, the
    dev verdicts and the time (and the dr correction's size)."""
    f3 = lambda v: "—" if v is None else f"{v:.3f}"  # noqa: E731
    pct = lambda v: "—" if v is None else f"{v:.1%}"  # noqa: E731
    head = ["set", "seed", "row", "mean Pearson", "D [95%]", "spread ratio"] + (["\\|dr − q\\|"] if correction else []) + [
        "reward rms", "reward width", "power (gap > 0.05)", "wrong / called", "s/agent (median)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, cell in cells.items():
        b, s = key.split("/")
        for name in rows:
            if name not in cell:
                continue
            r = cell[name]
            d = r.get("D")
            dcell = "" if d is None else f"{d['difference']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"
            cols = [b, s[1:], f"`{name}`", f"{r['mean_pearson']:.3f}", dcell, f"{r['spread']:.2f}"]
            cols += [f3(r.get("correction"))] if correction else []
            cols += [f3(r.get("reward_rms")), f3(r.get("reward_width")), pct(r["power"]), f"{r['wrong']} / {r['called']}",
                     f"{r['seconds_median']:.1f}"]
            lines.append("| " + " | ".join(cols) + " |")
    return lines


def verdict_line(outcome: dict, cells: dict[str, dict]) -> str:
    """A rule's last line: eligible or not, condition by condition, or the (set, seed) runs still missing."""
    if not outcome["decided"]:
        return "- Not decided: " + ", ".join(k for k in [f"{b}/s{s}" for b in SETS for s in SEEDS] if k not in cells) + " not run."
    return (f"- **{'Eligible' if outcome['eligible'] else 'Not eligible'}**: "
            + "; ".join(f"{k}: {'met' if v else 'not met'}" for k, v in outcome["conditions"].items()) + ".")


def seed_sds(study: str, rows: list[str]) -> dict[str, dict[str, float]]:
    """Per set whose three seeds have all run: each row's between-seed sd of an agent's reward estimate."""
    out = {}
    for b in SETS:
        runs = [load(b, study, s) for s in SEEDS]
        if all(runs):
            out[b] = {row: seed_sd([r["rows"][row]["estimates"] for r in runs]) for row in rows}
    return out


def quantity_lines(cells: dict[str, dict], means: dict[str, float | None], sds: dict[str, dict[str, float]],
                   reference: str, candidate: str) -> list[str]:
    """The rule's quantities per set: D̄, the reward residual's three-seed mean and the between-seed sd,
    reference → candidate."""
    sg = lambda v: "—" if v is None else f"{v:+.3f}"  # noqa: E731
    f3 = lambda v: "—" if v is None else f"{v:.3f}"  # noqa: E731
    rms = lambda b, row: st.mean(cells[f"{b}/s{s}"][row]["reward_rms"] for s in SEEDS) if means[b] is not None else None  # noqa: E731
    lines = [f"| set | D̄ (`{candidate}` − `{reference}`, mean of seeds 0–2) | reward rms, three-seed mean ({reference} → {candidate}) | "
             f"between-seed sd of an agent's reward estimate ({reference} → {candidate}) |", "|---|---|---|---|"]
    for b in SETS:
        sd = sds.get(b)
        lines.append(f"| {b} | {sg(means[b])} | {f3(rms(b, reference))} → {f3(rms(b, candidate))} | "
                     + ("—" if sd is None else f"{sd[reference]:.3f} → {sd[candidate]:.3f}") + " |")
    return lines


def pooled_verdict_lines(cells: dict[str, dict], reference: str, candidate: str) -> list[str]:
    """The dev verdicts pooled over the k = 0 halves' cells and over the delayed stores', per row."""
    lines = []
    for label, sets in (("k = 0 halves", K0), ("delayed stores", DELAYED)):
        pooled = []
        for row in (reference, candidate):
            part = [c[row] for k, c in cells.items() if k.split("/")[0] in sets and row in c]
            big = sum(r["big"] for r in part)
            hits = sum(r["power"] * r["big"] for r in part if r["power"] is not None)
            pooled.append(f"power {hits / big:.1%} of {big}, wrong {sum(r['wrong'] for r in part)} of {sum(r['called'] for r in part)} called"
                          if big else "—")
        lines.append(f"- Dev verdicts pooled over the {label}' cells (every rating; each pair calibrated on the other 11 dev agents): "
                     f"{reference if reference == 'default' else f'`{reference}`'} {pooled[0]}; `{candidate}` {pooled[1]}.")
    return lines


def rule_means(means: dict[str, float | None]) -> dict[str, float]:
    """The means the three-seed rules read: the delayed stores' D̄, the k = 0 halves' D̄ and its lowest."""
    return {"delayed_mean": st.mean(means[b] for b in DELAYED), "k0_mean": st.mean(means[b] for b in K0),
            "k0_lowest": min(means[b] for b in K0)}


def rule_mean_lines(outcome: dict) -> list[str]:
    return [f"- Delayed stores: mean D̄ {outcome['delayed_mean']:+.4f} (asked ≥ +0.020).",
            f"- k = 0 halves: mean D̄ {outcome['k0_mean']:+.4f} (asked ≥ −0.005), lowest {outcome['k0_lowest']:+.4f} (asked ≥ −0.015)."]


def collect(study: str, reference: str, candidate: str) -> tuple[dict[str, dict], dict[str, float | None], dict[str, dict[str, float]]]:
    """What a three-seed rule's summary starts from: the cells (``gather`` on the repository's
    params), the candidate's D̄ per set and each row's between-seed sd."""
    from enigma.params import Params

    cells = gather(Params.load(), study)
    return cells, {b: d_bar(cells, b, candidate) for b in SETS}, seed_sds(study, [reference, candidate])
