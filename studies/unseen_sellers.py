"""Knowledge bases on sellers that no choice was made on: new knob combinations of the simulator,
estimated from the airline store through ``enigma estimate``, as a user would estimate new agents.

The airline benchmarks' knowledge bases were designed by looking at their 27 sellers and
confirmed on other stores of the same 27. Here eight sellers that are in no store are scored
against their true ratings (fresh on-policy rollouts, ``enigma.sim.generate.true_values``), each
knowledge base in its own run of the CLI on the same sampled replies. Six of the eight mishear
the customer, in knob combinations no store seller has; two do not mishear at all. The table was
fixed before any estimate was read.

Importable as an agent module: ``python:unseen_sellers:<id>`` (with ``studies/`` on the path).

    .venv/bin/python studies/unseen_sellers.py --tag unseen_sellers_knowledge

Output: studies/results/<tag>.{md,json}; work files under data/work/unseen_sellers.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import yaml
from scipy.stats import pearsonr, spearmanr

from enigma.sim.seller_presets import SellerKnobs
from enigma.sim.sellers import SellerAgent

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results"
RATINGS = ("reward", "name", "flight", "status")

_K = SellerKnobs
UNSEEN: dict[str, SellerKnobs] = {
    "deaf_first_fit": _K(choice="first", mishear_city=0.25, mishear_date=0.25, style="terse"),
    "deaf_verbose_direct": _K(style="verbose", confirm=False, mishear_city=0.2, mishear_date=0.2, mishear_name=0.2),
    "name_deaf": _K(mishear_name=0.45, style="friendly"),
    "deaf_no_prefs": _K(ask_prefs=False, confirm=False, mishear_city=0.3),
    "deaf_quitter": _K(give_up=0.2, mishear_date=0.3),
    "slightly_deaf_trusting": _K(mishear_city=0.1, mishear_date=0.1, check_reservation=False),
    "sloppy_slip": _K(status_slip=0.25, confirm=False, style="friendly"),
    "first_fit_no_prefs_verbose": _K(choice="first", ask_prefs=False, style="verbose"),
}
MISHEARS = {a for a, k in UNSEEN.items() if k.mishear_city or k.mishear_date or k.mishear_name}


def __getattr__(name: str) -> Callable[[], SellerAgent]:
    if name in UNSEEN:
        return lambda: SellerAgent(name, UNSEEN[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _truth(simulate: dict) -> dict[str, dict[str, float]]:
    from enigma.sim.generate import SimulateConfig, true_values

    cfg = SimulateConfig(**simulate)
    return {a: {row["rating"]: row["value"] for row in true_values(a, cfg, agent=SellerAgent(a, knobs))}
            for a, knobs in UNSEEN.items()}


def _estimate(base: str, store: Path, work: Path) -> dict[str, dict[str, float]]:
    """``enigma estimate`` of every unseen seller with ``dice.knowledge: base`` (no interval)."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["estimators"]["enigma"]["dice"].update(knowledge=base, interval_resamples=0)
    out = work / base.rsplit(":", 1)[1]
    out.mkdir(parents=True, exist_ok=True)
    (out / "params.yaml").write_text(yaml.safe_dump(params))
    if not (out / "run" / "estimates.json").exists():
        targets = [arg for a in UNSEEN for arg in ("--target", f"{a}=python:unseen_sellers:{a}")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "studies"), os.environ.get("PYTHONPATH", "")]))
        subprocess.run([str(ROOT / ".venv" / "bin" / "enigma"), "estimate", "--experience", str(store), *targets,
                        "--out", str(out / "run"), "--params", str(out / "params.yaml"),
                        "--cache-dir", str(ROOT / "cache"), "-q"], check=True, env=env, cwd=ROOT)
    found = json.loads((out / "run" / "estimates.json").read_text())["targets"]
    return {a: {r: found[a][r]["estimate"] for r in RATINGS} for a in UNSEEN}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, default=Path("data/airline/store"), help="relative to the repository root")
    ap.add_argument("--bases", nargs="+", default=["python:enigma.sim.knowledge:airline_requests",
                                                    "python:enigma.sim.knowledge:airline_checked"])
    ap.add_argument("--work", type=Path, default=Path("data/work/unseen_sellers"), help="relative to the repository root")
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT / "studies"))
    from provenance import code_version

    simulate = yaml.safe_load((ROOT / "params.yaml").read_text())["simulate"]
    truth = _truth(simulate)
    est = {b: _estimate(b, args.store, args.work) for b in args.bases}
    names = {b: b.rsplit(":", 1)[1] for b in args.bases}
    agents = list(UNSEEN)
    command = shlex.join([".venv/bin/python", "studies/unseen_sellers.py", *sys.argv[1:]])
    md = [f"# Knowledge bases on sellers in no store ({args.store})", "", f"`{command}` (code: {code_version()})", "",
          "Eight sellers with knob combinations no store seller has (`studies/unseen_sellers.py`), estimated by "
          "`enigma estimate` from the store with each base; true ratings from fresh rollouts (params.yaml `simulate`). "
          "An estimate's error is estimate minus truth, on the rating's own scale.", "",
          "| seller | mishears | true reward | " + " | ".join(f"{names[b]} reward (error)" for b in args.bases) + " |",
          "|---|---|---|" + "---|" * len(args.bases)]
    for a in agents:
        cells = [f"{est[b][a]['reward']:.3f} ({est[b][a]['reward'] - truth[a]['reward']:+.3f})" for b in args.bases]
        md.append(f"| {a} | {'yes' if a in MISHEARS else 'no'} | {truth[a]['reward']:.3f} | " + " | ".join(cells) + " |")
    summary = {}
    md += ["", "| base | rating | Pearson | Spearman | mean absolute error | mean error, mishearing | mean error, the others |",
           "|---|---|---|---|---|---|---|"]
    for b in args.bases:
        summary[names[b]] = {}
        for r in RATINGS:
            t = np.array([truth[a][r] for a in agents])
            e = np.array([est[b][a][r] for a in agents])
            err = e - t
            row = {"pearson": float(pearsonr(e, t)[0]), "spearman": float(spearmanr(e, t)[0]),
                   "mae": float(np.abs(err).mean()),
                   "mean_error_mishearing": float(np.mean([err[i] for i, a in enumerate(agents) if a in MISHEARS])),
                   "mean_error_others": float(np.mean([err[i] for i, a in enumerate(agents) if a not in MISHEARS]))}
            summary[names[b]][r] = row
            md.append(f"| {names[b]} | {r} | {row['pearson']:.3f} | {row['spearman']:.3f} | {row['mae']:.3f} | "
                      f"{row['mean_error_mishearing']:+.3f} | {row['mean_error_others']:+.3f} |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.tag}.md").write_text("\n".join(md) + "\n")
    (RESULTS / f"{args.tag}.json").write_text(json.dumps({
        "reproduce": command, "code": code_version(), "truth": truth,
        "estimates": {names[b]: est[b] for b in args.bases}, "summary": summary,
        "sellers": {a: {k: v for k, v in vars(UNSEEN[a]).items() if v != getattr(SellerKnobs(), k)} for a in agents},
    }, indent=1) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
