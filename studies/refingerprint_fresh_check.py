"""One carried-over result against a fresh run of today's code (issue 71's migration,
studies/results/refingerprint_history_extremes.md): the result is recomputed as the train stage
computes it (``evaluate_one``, not resumed) into a temporary folder and compared with the saved
file: the json rows (their ``seconds`` aside), the fingerprint, and the heads and curve, byte for
byte.

    .venv/bin/python studies/refingerprint_fresh_check.py airline enigma-weighted careless
"""

from __future__ import annotations

import argparse
import filecmp
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("benchmark")
    ap.add_argument("estimator", help="its params.yaml name, e.g. enigma-weighted")
    ap.add_argument("agent")
    ap.add_argument("--full", action="store_true", default=True, help="the saved result is in results_full (default)")
    ap.add_argument("--main", dest="full", action="store_false", help="the saved result is in results")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "src"))
    from enigma.contracts import Regime
    from enigma.estimators import benchmark_estimator
    from enigma.evaluation.loao import evaluate_one
    from enigma.evaluation.results import result_path
    from enigma.params import Params
    from enigma.pipeline.sample import read_targets
    from enigma.pipeline.train import sources
    from enigma.store.experience import ExperienceStore

    params = Params.load(REPO / "params.yaml")
    b = params.benchmark(args.benchmark)
    store = ExperienceStore.open(b.store)
    rollouts = ExperienceStore.open(b.rollouts) if b.rollouts is not None else None
    est = benchmark_estimator(b, args.estimator, params)
    targets = read_targets(b, args.agent) if Regime.REPLIES_AT_LOGGED_STATES in est.regimes else None
    saved = result_path(b.results_dir(args.full), est.name, args.agent)
    if not saved.is_file():
        raise SystemExit(f"{saved}: no saved result to compare with")

    def rows(p: Path) -> dict:
        d = json.loads(p.read_text())
        for r in d["rows"]:
            r.pop("seconds", None)
        return d

    same = True
    with tempfile.TemporaryDirectory() as tmp:
        evaluate_one(store, est, args.agent, sources(b, targets, rollouts), tmp, resume=False)
        fresh = result_path(tmp, est.name, args.agent)
        checks = {"json rows (seconds aside)": rows(fresh) == rows(saved),
                  "fingerprint": json.loads(fresh.read_text())["fingerprint"] == json.loads(saved.read_text())["fingerprint"]}
        for f in sorted(fresh.parent.glob(args.agent + ".*")):
            if f.suffix not in (".json", ".seconds"):
                checks[f.name + " byte-identical"] = filecmp.cmp(f, saved.parent / f.name, shallow=False)
    for what, ok in checks.items():
        print(f"{what}: {'yes' if ok else 'NO'}")
        same &= ok
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
