"""Airline leave-one-agent-out: ENIGMA with and without the agreement features, side by side.

The agreement block (``dice.agreement``, see ``enigma.encoders.agreement.agreement_features``)
tells the zeta/nu heads how far each logged dialogue has followed the target agent: cosine, word
F1 and F1 of numbers/names between the logged reply and the target's reply at the same state,
at this turn and the earlier ones. Every other setting is the ``dice`` section of params.yaml.
Both rows run in one process on the same data, so their numbers compare even on a noisy machine.

Needs the airline store, truth and target actions (``dvc repro sample_airline``).

    .venv/bin/python studies/ope_agreement.py     # writes studies/results/ope_agreement.{json,md}
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import enigma  # noqa: E402,F401  (offline environment)

RESULTS = REPO / "studies" / "results"
ROWS = {"without agreement": {"agreement": False}, "with agreement (params.yaml)": {"agreement": True}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", default=None, help="comma-separated held-out agents (default: all)")
    ap.add_argument("--out", default=str(RESULTS / "ope_agreement"))
    args = ap.parse_args()

    import pandas as pd
    import pyarrow.parquet as pq
    import torch

    from enigma.contracts import HeldOutAgent
    from enigma.evaluation.correlation import score_estimator, spread_ratio
    from enigma.ope.config import DiceConfig
    from enigma.ope.estimator import EnigmaEstimator
    from enigma.params import Params
    from enigma.store.experience import ExperienceStore

    torch.set_num_threads(1)
    params = Params.load(REPO / "params.yaml")
    section = dict(params.estimators["enigma"].dice)
    cache_dir = params["encode"]["cache"]["cache_dir"]
    store = ExperienceStore.open(REPO / "data/airline/store")
    truth_long = pd.read_parquet(REPO / "data/airline/truth.parquet")
    truth = truth_long.pivot(index="agent_id", columns="rating", values="value")
    agents = args.agents.split(",") if args.agents else store.agents()
    ratings = list(store.rating_names)

    rows, curves = {}, []
    for label, override in ROWS.items():
        est = EnigmaEstimator(DiceConfig.from_section({**section, **override}), cache_dir=str(REPO / cache_dir), progress=False)
        per_agent, drift, t0 = {}, {}, time.perf_counter()
        for a in agents:
            targets = pq.read_table(REPO / f"data/airline/targets/{a}.parquet")
            r = est.estimate_full(store.without_agent(a), HeldOutAgent(agent_id=a, target_actions=targets))
            per_agent[a] = {k: v["estimate"] for k, v in r.estimates.items()}
            curve = r.curves["all"]
            curves += [{"row": label, "agent": a, **{k: c[k] for k in ("step", "zeta_mean", "ess_share", "lambda", "estimate_reward")}} for c in curve]
            # convergence: how far the reward estimate moved over the last 30% of the logged steps
            tail = [c["estimate_reward"] for c in curve if c["step"] >= 0.7 * curve[-1]["step"]]
            drift[a] = max(tail) - min(tail)
            print(f"{label:30s} {a:18s} reward truth {truth.loc[a, 'reward']:.3f} estimate {per_agent[a]['reward']:.3f}", flush=True)
        seconds = (time.perf_counter() - t0) / len(agents)
        estimates = pd.DataFrame.from_dict(per_agent, orient="index")
        score = score_estimator(label, estimates, truth.loc[agents], ratings)
        rows[label] = {
            "overrides": override,
            "seconds_per_agent": seconds,
            "mean_pearson": score.means["pearson"],
            "mean_spearman": score.means["spearman"],
            "per_rating": {k: {s: v[s] for s in ("pearson", "pearson_ci95", "spearman", "spearman_ci95", "kendall")} for k, v in score.per_rating.items()},
            "reward_spread_ratio": spread_ratio(estimates.loc[agents, "reward"], truth.loc[agents, "reward"]),
            "max_reward_estimate_drift_last_30pct_steps": max(drift.values()),
            "estimates": per_agent,
        }

    out = Path(args.out)
    result = {
        "what": "airline leave-one-agent-out, ENIGMA (params.yaml dice section) with and without dice.agreement",
        "reproduce": ".venv/bin/python studies/ope_agreement.py",
        "agents": agents,
        "truth": {a: truth.loc[a].to_dict() for a in agents},
        "rows": rows,
    }
    pd.DataFrame(curves).to_csv(out.parent / (out.name + "_curves.csv"), index=False)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=float))
    lines = [
        "# ENIGMA on the airline benchmark: with and without the agreement features",
        "",
        f"`{result['reproduce']}` ({len(agents)} held-out agents; other settings: params.yaml `dice`).",
        "",
        "Learning curves (every held-out agent, both rows): `ope_agreement_curves.csv`. Drift: the largest",
        "range of an agent's reward estimate over the last 30% of its logged steps (convergence).",
        "",
        "| row | reward Pearson [95% CI] | reward Spearman [95% CI] | mean Pearson over ratings | mean Spearman | spread ratio (reward) | max drift | s/agent |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, r in rows.items():
        rw = r["per_rating"]["reward"]
        ci = lambda v: f"[{v[0]:.3f}, {v[1]:.3f}]" if v and v[0] is not None else "[n/a]"  # noqa: E731
        lines.append(
            f"| {label} | {rw['pearson']:.3f} {ci(rw['pearson_ci95'])} | {rw['spearman']:.3f} {ci(rw['spearman_ci95'])} | "
            f"{r['mean_pearson']:.3f} | {r['mean_spearman']:.3f} | {r['reward_spread_ratio']:.2f} | "
            f"{r['max_reward_estimate_drift_last_30pct_steps']:.4f} | {r['seconds_per_agent']:.1f} |"
        )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
