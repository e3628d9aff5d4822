"""Did a change that should not move a number move one? Every committed main report's numbers at
REV against the working tree's: per report, each estimator's mean Pearson over the ratings (all
agents, and each half where both have halves) and the largest move of its per-agent estimates.

Issue 59's rule: moving the lab out changes no ENIGMA or comparator number beyond the float noise
measured between rebuilds (3e-3).

    .venv/bin/python studies/behaviour_unchanged.py --rev 4841676 --tag lab_move_behaviour
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from studies.cold_rebuild_shift import estimate_moves, mean_pearsons  # noqa: E402
from studies.result_files import write_result  # noqa: E402

TOLERANCE = 3e-3


def at_rev(rev: str, path: str) -> dict | None:
    got = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=REPO, capture_output=True, text=True)
    return json.loads(got.stdout) if got.returncode == 0 else None


def estimated(summary: dict) -> set[tuple[str, str, str]]:
    """The (agent, rating, estimator) cells that hold an estimate."""
    return {(agent, rating, name) for agent, per in summary.get("agents", {}).items() for rating, cell in per.items()
            for name, value in cell.items() if name != "truth" and value is not None}


def moves(old: dict, new: dict) -> list[tuple[str, float | None, float | None, float]]:
    """``(estimator, old mean Pearson, new, largest |estimate move| over agents and ratings)``; an
    estimate that one report has and the other lacks is an infinite move."""
    old_mp, new_mp = mean_pearsons(old), mean_pearsons(new)
    largest = {name: worst for name, (worst, _) in estimate_moves(old, new).items()}
    for _, _, name in estimated(old) ^ estimated(new):
        largest[name] = float("inf")
    return [(name, old_mp.get(name), new_mp.get(name), largest.get(name, 0.0)) for name in sorted(set(old_mp) | set(new_mp))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rev", required=True)
    ap.add_argument("--tag", required=True)
    args = ap.parse_args(argv)
    summaries = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "reports").glob("*/summary.json")
                       if not p.parent.name.endswith("_full"))
    cmd = shlex.join([".venv/bin/python", "studies/behaviour_unchanged.py", *(argv if argv is not None else sys.argv[1:])])
    lines = [f"# Report numbers at {args.rev} against the working tree", "", f"`{cmd}`", "",
             f"Tolerance: {TOLERANCE:g} (the float noise measured between rebuilds). *largest move*: the largest absolute "
             "difference of one per-agent estimate over every agent and rating.", ""]
    worst_all, rows_json = 0.0, {}
    for path in summaries:
        old, new = at_rev(args.rev, path), json.loads((REPO / path).read_text())
        if old is None:
            lines += [f"## {path}", "", f"not in {args.rev}: nothing to compare", ""]
            continue
        lines += [f"## {path}", "", "| estimator | mean Pearson at rev | now | difference | largest move of an estimate |",
                  "|---|---|---|---|---|"]
        rows_json[path] = []
        for name, a, b, w in moves(old, new):
            d = None if a is None or b is None else b - a
            worst_all = max(worst_all, w, abs(d) if d is not None else float("inf"))
            lines.append(f"| {name} | {a if a is None else f'{a:.4f}'} | {b if b is None else f'{b:.4f}'} | "
                         f"{'n/a' if d is None else f'{d:+.2e}'} | {w:.2e} |")
            rows_json[path].append({"estimator": name, "old": a, "new": b, "largest_move": w})
        lines.append("")
    verdict = "within" if worst_all <= TOLERANCE else "OUTSIDE"
    lines.insert(6, f"**Largest difference over every report, estimator and estimate: {worst_all:.2e}, {verdict} the tolerance.**")
    lines.insert(7, "")
    write_result(args.tag, lines, {"command": cmd, "rev": args.rev, "largest": worst_all, "reports": rows_json})
    return 0 if worst_all <= TOLERANCE else 1


if __name__ == "__main__":
    raise SystemExit(main())
