"""Issue 59: the studied rows moved from params.yaml to studies/params.yaml. Every estimator the
old params.yaml ran, on every benchmark that ran it, must resolve to the same configuration now:
the product's params.yaml where the product still runs it, studies/params.yaml where the lab
does. Checked by what keys a saved result (enigma.evaluation.fingerprints.estimator_fingerprint,
over the estimator's name, regimes and settings), and for ENIGMA's entries by the whole resolved
DiceConfig too; and every other setting of the product by its typed value (its key order too).

    .venv/bin/python studies/params_move_check.py [--old REV] [--out studies/results/params_move_check.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OLD_REV = "4841676"  # main before the move: the last params.yaml that held the studied rows


def _fingerprint(params, bench: str, name: str) -> tuple[str, str | None]:
    from enigma.estimators import benchmark_estimator, dice_config
    from enigma.evaluation.fingerprints import estimator_fingerprint

    b = params.benchmark(bench)
    est = benchmark_estimator(b, name, params)
    dice = None
    if name in params.estimators:
        cfg = dice_config(name, params, b.config.knowledge).model_dump(mode="json")
        dice = json.dumps({"dice": cfg, "random_encoder": params.estimators[name].random_encoder}, sort_keys=True)
    return estimator_fingerprint(est), dice


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", default=OLD_REV, help="the git revision whose params.yaml is the reference")
    ap.add_argument("--out", type=Path, default=REPO / "studies" / "results" / "params_move_check.md")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "src"))
    from enigma.params import Params

    text = subprocess.run(["git", "show", f"{args.old}:params.yaml"], cwd=REPO, check=True, capture_output=True, text=True).stdout
    # the gradient descent-ascent preset was named "default" then (renamed gda since, issue 59)
    text = text.replace("preset: default", "preset: gda")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "params.yaml").write_text(text)
        old = Params.load(Path(tmp) / "params.yaml")
    product = Params.load(REPO / "params.yaml")
    studies = Params.load(REPO / "studies" / "params.yaml")

    rows, failures = [], []
    for bench, entry in old.benchmarks.items():
        for name in entry.estimators + entry.full_estimators:
            where = []
            for label, params in (("params.yaml", product), ("studies/params.yaml", studies)):
                if bench in params.benchmarks and name in params.benchmark(bench).estimators(False) + params.benchmark(bench).estimators(True):
                    # the lab's file extends the product's, so the main run's rows are in both: name the product's
                    if label == "studies/params.yaml" and where:
                        continue
                    where.append((label, params))
            if not where:
                rows.append((bench, name, "-", "-", "not run any more"))
                failures.append(f"{bench}/{name}: in neither file")
                continue
            label, params = where[0]
            old_fp, old_dice = _fingerprint(old, bench, name)
            new_fp, new_dice = _fingerprint(params, bench, name)
            same = old_fp == new_fp and old_dice == new_dice
            rows.append((bench, name, label, old_fp, "same" if same else f"DIFFERENT ({new_fp})"))
            if not same:
                failures.append(f"{bench}/{name}")

    # every entry of the old estimators section, wherever it lives now (no benchmark's knowledge base)
    for name in old.estimators:
        params = product if name in product.estimators else studies if name in studies.estimators else None
        if params is None:
            failures.append(f"estimators.{name}: in neither file")
            continue
        from enigma.estimators import dice_config

        if (dice_config(name, old).model_dump(mode="json") != dice_config(name, params).model_dump(mode="json")
                or old.estimators[name].random_encoder != params.estimators[name].random_encoder
                or old.estimators[name].note != params.estimators[name].note):
            failures.append(f"estimators.{name}: resolves differently")

    # every other setting of the product as it was (benchmarks: all but full_estimators), key order included
    def rest(p):
        d = p.model_dump(mode="json", exclude={"estimators"})
        for b in d["benchmarks"].values():
            b.pop("full_estimators")
        return json.dumps(d)

    sections_same = rest(old) == rest(product)
    if not sections_same:
        failures.append("a setting outside estimators and full_estimators changed")
    lab_main_same = all(studies.benchmarks[b].estimators == product.benchmarks[b].estimators for b in product.benchmarks)
    if not lab_main_same:
        failures.append("studies/params.yaml changes a benchmark's main estimators")
    lines = [
        f"# Issue 59: the studied rows moved out of params.yaml (reference: params.yaml at {args.old})",
        "",
        f"Reproduce: `.venv/bin/python studies/params_move_check.py --old {args.old}`. Each (benchmark, estimator) the old",
        "params.yaml ran, resolved from the file that runs it now: the estimator fingerprint a saved result is keyed by",
        "(`enigma.evaluation.fingerprints.estimator_fingerprint`) and, for ENIGMA's entries, the whole resolved DiceConfig",
        "and random_encoder flag.",
        "",
        f"- (benchmark, estimator) pairs checked: {len(rows)}; the same: {sum(r[4] == 'same' for r in rows)}",
        f"- entries of the old estimators section resolving the same (no knowledge base): "
        f"{len(old.estimators) - sum(f.startswith('estimators.') for f in failures)} of {len(old.estimators)}",
        f"- every other product setting (all sections; benchmarks but their full_estimators) unchanged: {sections_same}",
        f"- the lab's main estimators lists are the product's: {lab_main_same}",
        f"- product estimators: {len(product.estimators)}; the lab's (with the product's): {len(studies.estimators)}",
        "",
        "**" + ("All the same." if not failures else "DIFFERENT: " + "; ".join(failures)) + "**",
        "",
        "| benchmark | estimator | runs from | estimator fingerprint | now |",
        "|---|---|---|---|---|",
        *[f"| {b} | {n} | {w} | {fp} | {s} |" for b, n, w, fp, s in rows],
    ]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:15]))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
