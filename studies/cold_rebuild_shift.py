"""How far a report moves when it is rebuilt (from empty caches, or on another machine): each
estimator's mean Pearson in the report as committed at REV against the report in the working tree,
the largest and the median move of its estimates (over agents and ratings), and how far one text's
cached sentence vector depends on the texts it was embedded beside.

The embedding cache stores each text's vector once, computed in whatever batch the text first
came in; a padded batch changes the vector in its last bits. A store whose cache grew over many
runs therefore holds slightly other vectors than one filled in one go, and estimators trained by
SGD carry that difference on as a different start would.

    .venv/bin/python studies/cold_rebuild_shift.py reports/see2019_full/summary.json --rev d085687 \
        --tag cold_rebuild_see2019
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
SHORT = "I like dogs a lot."
LONG = ("Hello there, how are you doing today my friend? I have been reading a very long book about the "
        "history of sailing ships and the sea, and I cannot put it down.")


def mean_pearsons(summary: dict) -> dict[str, float]:
    """Each estimator's mean Pearson over the ratings, as the report ranks it."""
    return {row["estimator"]: row["mean_pearson"] for row in summary["ranking"]}


def estimate_diffs(old: dict, new: dict) -> dict[str, list[float]]:
    """Per estimator in both reports: the absolute difference of each of its estimates over every
    (agent, rating) that both hold (0.0 exactly where the two are the same float)."""
    from enigma.evaluation.summary_file import agent_cells

    diffs: dict[str, list[float]] = {}
    new_cells = agent_cells(new)
    for agent, ratings in agent_cells(old).items():
        for rating, values in ratings.items():
            other = new_cells.get(agent, {}).get(rating, {})
            for name, value in values.items():
                if name != "truth" and name in other and value is not None and other[name] is not None:
                    diffs.setdefault(name, []).append(abs(other[name] - value))
    return diffs


def estimate_moves(old: dict, new: dict) -> dict[str, tuple[float, float]]:
    """Per estimator in both reports: the largest and the median absolute difference of its
    estimates over every (agent, rating) that both hold."""
    return moves_of(estimate_diffs(old, new))


def moves_of(diffs: dict[str, list[float]]) -> dict[str, tuple[float, float]]:
    """Per estimator: the largest and the median of its ``estimate_diffs``."""
    return {name: (float(np.max(d)), float(np.median(d))) for name, d in diffs.items()}


def bits_moved(diffs: dict[str, list[float]]) -> dict[str, tuple[int, int, float]]:
    """Per estimator: how many of its estimates are not the same float (of how many), and the
    largest difference: the bit-for-bit view, where ``estimate_moves`` rounds."""
    return {name: (sum(x != 0.0 for x in d), len(d), float(max(d))) for name, d in diffs.items()}


def batch_dependence(model: str) -> float:
    """Largest coordinate difference of SHORT's vector embedded alone and beside LONG."""
    from enigma.encoders.text_cache import EmbeddingCache

    alone = EmbeddingCache(model, tempfile.mkdtemp(), progress=False).embed([SHORT])[0]
    beside = EmbeddingCache(model, tempfile.mkdtemp(), progress=False).embed([SHORT, LONG])[0]
    return float(abs(alone - beside).max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("summary", help="a report's summary.json in the working tree (the rebuilt one)")
    ap.add_argument("--rev", required=True, help="the commit whose version of the same file is compared")
    ap.add_argument("--model", default="minilm", help="the sentence encoder of the batch check")
    ap.add_argument("--tag", required=True, help="writes studies/results/<tag>.md")
    ap.add_argument("--title", default="Rebuilt from empty caches", help="the result file's heading: how it was rebuilt")
    args = ap.parse_args()
    old_text = subprocess.check_output(["git", "show", f"{args.rev}:{args.summary}"], text=True)
    new_text = Path(args.summary).read_text()
    old_summary, new_summary = json.loads(old_text), json.loads(new_text)
    old, new = mean_pearsons(old_summary), mean_pearsons(new_summary)
    diffs = estimate_diffs(old_summary, new_summary)
    moves = moves_of(diffs)
    rows = [(abs(new[name] - old[name]), name, old[name], new[name]) for name in sorted(set(old) & set(new))]
    rows.sort(key=lambda r: (-r[0], r[1]))
    moved = [r for r in rows if r[0] >= 1e-6]
    drift = batch_dependence(args.model)
    lines = [
        f"# {args.title}: {args.summary} against its version at {args.rev}",
        "",
        f"Reproduce: `.venv/bin/python studies/cold_rebuild_shift.py {args.summary} --rev {args.rev} --tag {args.tag}"
        + (f" --title {shlex.quote(args.title)}`" if args.title != ap.get_default("title") else "`"),
        "",
        f"- one text's sentence vector ({args.model}) embedded alone and beside a longer text: largest "
        f"coordinate difference {drift:.2e}",
        f"- estimators in both: {len(rows)}; moved by 1e-6 or more in mean Pearson: {len(moved)}; the rest "
        f"moved by at most {max((r[0] for r in rows if r[0] < 1e-6), default=0.0):.1e}",
        f"- only in {args.rev}: {sorted(set(old) - set(new)) or 'none'}; only rebuilt: {sorted(set(new) - set(old)) or 'none'}",
        "",
        "| estimator | mean Pearson at " + args.rev + " | rebuilt | difference | its estimates: largest move | median move |",
        "|---|---|---|---|---|---|",
    ]
    for _, name, a, b in moved:
        largest, median = moves.get(name, (float("nan"), float("nan")))
        lines.append(f"| {name} | {a:.4f} | {b:.4f} | {b - a:+.4f} | {largest:.1e} | {median:.1e} |")
    bits = bits_moved(diffs)
    lines += ["", f"Bit for bit: the rebuilt {args.summary} is "
              + ("byte-identical to" if new_text == old_text else "not byte-identical to")
              + f" {args.rev}'s. Per estimator, the estimates that are not the same float:", "",
              "| estimator | estimates not the same float | largest difference |", "|---|---|---|"]
    for name in sorted(bits):
        n, total, largest = bits[name]
        lines.append(f"| {name} | {n} of {total} | {largest:.1e} |")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{args.tag}.md"
    out.write_text("\n".join(lines) + "\n")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
