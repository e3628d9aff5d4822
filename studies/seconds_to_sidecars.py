"""One-off migration (issue 59): result files written before the wall time left them.

A result file (``<results>/<estimator>/<agent>.json``) used to hold each row's ``seconds``; the
runner now writes it as ``<agent>.seconds`` beside the file (``enigma.evaluation.results``), so
the file is the same bytes on every machine that computes the same numbers. This moves the time
of every saved file into its sidecar and writes the file as the runner writes it now; the
numbers and the fingerprint are untouched. Run once per results folder; a second run changes
nothing.

    .venv/bin/python studies/seconds_to_sidecars.py data/*/results data/*/results_full
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from enigma.evaluation.results import write_result


def migrate(path: Path) -> bool:
    """Move ``path``'s wall time to its sidecar, by the runner's own writer; True if the file changed."""
    saved = json.loads(path.read_text())
    if all(r.get("seconds") is None for r in saved["rows"]):
        return False
    write_result(path, saved["fingerprint"], saved["rows"])
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    args = ap.parse_args()
    for folder in args.folders:
        files = sorted(folder.glob("*/*.json"))
        changed = sum(migrate(f) for f in files)
        print(f"{folder}: {changed} of {len(files)} result files moved their wall time to a sidecar")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
