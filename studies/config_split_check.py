"""Issue 59, item 3: splitting DiceConfig into one part per module must change no number. This
runs a few real estimates on the code of a git revision and on the working tree and compares
their results EXACTLY (every estimate, interval, ESS, diagnostic and learning-curve value; not
the fingerprint, which changes by design, nor the recorded ``diagnostics.config``, whose form
changed: the resolved settings in the flat section's words instead of the old flat dump).

    .venv/bin/python studies/config_split_check.py [--rev main]

It exports ``--rev`` with ``git archive`` into a temporary folder (no worktree, nothing written
to the repository), runs ``run`` there and here in fresh processes (PYTHONPATH at each ``src``,
each reading its own ``params.yaml``), writes both JSONs to ``--out`` and the comparison to
studies/results/config_split_check.md. The cases:

- ENIGMA as params.yaml runs it (``estimators.enigma``; ``interval_resamples`` 20 to keep it
  fast) on the first two held-out agents of airline (the benchmark's store and sampled replies,
  the shared embedding cache, read only);
- ``enigma-gda`` (params.yaml's row, ``steps`` 60) on the first of them;
- the tabular problem (enigma.ope.tabular's reference problem, 600 dialogues) with onehot
  features: ENIGMA's default section with ``encoder: onehot`` (exact_nu, the dr value with the
  fqe Q, a 20-resample interval), and the gda preset as tests/ope/test_ope_exactness.py runs it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAIN = Path("/work/main")
DATA = MAIN / "data" / "airline"
CACHE = MAIN / "cache" / "embeddings"
PYTHON = MAIN / ".venv" / "bin" / "python"


def _jsonable(x):
    import numpy as np
    import pandas as pd

    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, pd.DataFrame):
        return _jsonable(x.to_dict(orient="list"))
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(float(x)) else repr(float(x))
    if isinstance(x, (np.integer, np.bool_)):
        return x.item()
    return x


def _result(res) -> dict:
    diagnostics = {k: v for k, v in res.diagnostics.items()}
    for per_run in diagnostics.values():
        if isinstance(per_run, dict):
            per_run.pop("config", None)
    diagnostics.pop("config", None)
    return _jsonable({"estimates": dict(res.estimates), "unnormalised": dict(res.unnormalised), "ess": dict(res.ess),
                      "intervals": dict(res.intervals), "diagnostics": diagnostics, "curve": res.curve})


def run(repo: Path, out: Path) -> None:
    """Every case on the code that is imported (PYTHONPATH), params.yaml read from ``repo``."""
    import pyarrow.parquet as pq
    import torch

    from enigma.contracts import HeldOutAgent
    from enigma.evaluation.heldout import HeldOutSources, held_out_view
    from enigma.ope import DiceConfig, EnigmaEstimator
    from enigma.ope.tabular import reference_problem, target_actions
    from enigma.params import Params
    from enigma.store.experience import ExperienceStore

    torch.set_num_threads(1)
    params = Params.load(repo / "params.yaml")
    store = ExperienceStore.open(DATA / "store")
    # the held-out agents: those the benchmark sampled replies of
    agents = sorted(a for a in store.agents() if (DATA / "targets" / f"{a}.parquet").exists())[:2]
    targets = {a: pq.read_table(DATA / "targets" / f"{a}.parquet") for a in agents}
    sources = HeldOutSources(target_actions=lambda agent, _experience: targets[agent])
    results: dict[str, dict] = {}

    def estimate(name: str, section: dict, agent: str) -> None:
        est = EnigmaEstimator(DiceConfig.from_section(section), encode=params.encode, name=name, cache_dir=CACHE, progress=False)
        experience, target, _ = held_out_view(store, agent, est, sources)
        results[f"airline/{name}/{agent}"] = _result(est.estimate(experience, target))
        print(f"airline/{name}/{agent} done", flush=True)

    enigma = dict(params.estimators["enigma"].dice)
    for agent in agents:
        estimate("enigma", {**enigma, "interval_resamples": 20}, agent)
    gda = {**enigma, **params.estimators["enigma-gda"].dice, "steps": 60}
    estimate("enigma-gda", gda, agents[0])

    problem = reference_problem()
    logs = problem.logs(600, seed=0)
    for name, cfg in {
        "enigma-onehot": DiceConfig.from_section({**enigma, "encoder": "onehot", "interval_resamples": 20, "device": "cpu"}),
        "gda-onehot": DiceConfig.preset("gda", encoder="onehot", head_hidden=0, tmax=3, steps=300, lr=2.0, log_every=50, device="cpu"),
    }.items():
        for policy in ("soft", "steady"):
            ta = target_actions(logs, problem.targets[policy], n_samples=2, seed=0)
            res = EnigmaEstimator(cfg, progress=False).estimate(logs, HeldOutAgent(policy, target_actions=ta))
            results[f"tabular/{name}/{policy}"] = _result(res)
            print(f"tabular/{name}/{policy} done", flush=True)
    out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


def compare(old, new, path: str = "") -> tuple[float, list[str]]:
    """The largest |difference| of the numbers, and every place the two differ in form."""
    if isinstance(old, dict) and isinstance(new, dict):
        worst, bad = 0.0, []
        if set(old) != set(new):
            bad.append(f"{path}: keys {sorted(set(old) ^ set(new))}")
        for k in set(old) & set(new):
            w, b = compare(old[k], new[k], f"{path}/{k}")
            worst, bad = max(worst, w), bad + b
        return worst, bad
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return 0.0, [f"{path}: lengths {len(old)} and {len(new)}"]
        worst, bad = 0.0, []
        for i, (a, b) in enumerate(zip(old, new)):
            w, x = compare(a, b, f"{path}[{i}]")
            worst, bad = max(worst, w), bad + x
        return worst, bad
    if isinstance(old, (int, float)) and isinstance(new, (int, float)) and not isinstance(old, bool):
        return abs(float(old) - float(new)), []
    return 0.0, [] if old == new else [f"{path}: {old!r} and {new!r}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", default="main")
    ap.add_argument("--out", default=None, help="where the two JSONs go (default: a temporary folder)")
    ap.add_argument("--run", nargs=2, metavar=("REPO", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.run:
        run(Path(args.run[0]), Path(args.run[1]))
        return
    rev = subprocess.run(["git", "rev-parse", args.rev], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    here = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "src", "params.yaml"], cwd=REPO, capture_output=True, text=True).stdout.strip())
    out = Path(args.out or tempfile.mkdtemp(prefix="config_split_check_"))
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cfgcheck-old-") as old_repo:
        subprocess.run(f"git archive {rev} src params.yaml | tar -x -C {old_repo}", shell=True, cwd=REPO, check=True)
        for label, repo in (("old", Path(old_repo)), ("new", REPO)):
            env = dict(os.environ, PYTHONPATH=str(repo / "src"))
            subprocess.run([str(PYTHON), str(Path(__file__).resolve()), "--run", str(repo), str(out / f"{label}.json")], env=env, check=True)
    old, new = (json.loads((out / f"{x}.json").read_text()) for x in ("old", "new"))
    worst, bad = compare(old, new)
    lines = [
        "# Issue 59, item 3: DiceConfig split into one config per module: the same numbers",
        "",
        f"Reproduce: `.venv/bin/python studies/config_split_check.py --rev {args.rev}` (studies/config_split_check.py's docstring: the cases).",
        f"Old: {rev[:12]} ({args.rev}); new: the worktree at {here[:12]}{' with uncommitted changes' if dirty else ''}.",
        "",
        f"- results compared: {len(old)} ({', '.join(sorted(old))})",
        "- numbers compared: every estimate, unnormalised estimate, ESS, interval, diagnostic and learning-curve value",
        f"- max |difference|: {worst!r}",
        f"- differences in form: {len(bad)}" + ("" if not bad else " — " + "; ".join(bad[:20])),
        "",
        "**" + ("Identical." if worst == 0 and not bad else "DIFFERENT.") + "**",
    ]
    (REPO / "studies" / "results" / "config_split_check.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    sys.exit(0 if worst == 0 and not bad else 1)


if __name__ == "__main__":
    main()
