"""Where the time of an ingest goes, on the real See 2019 logs: reading + record checks,
Great Expectations validation (its import measured apart: it is paid once per process), and
writing the Parquet store. Medians of ``--repeats`` runs in one process.

    .venv/bin/python studies/store_ingest.py [--repeats 3] [--out studies/results]

Writes ``<out>/store_ingest.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import enigma  # noqa: F401  (offline environment)

DATA = Path(__file__).resolve().parents[1] / "data" / "raw"
SOURCES = {
    "see2019": DATA / "see2019_convai2_humaneval" / "evallog",
    "see2019-selfplay": DATA / "see2019_convai2_humaneval" / "selfplay_hmjiang",
    "fed": DATA / "fed",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("studies/results"))
    args = ap.parse_args()

    t0 = time.perf_counter()
    import great_expectations  # noqa: F401

    gx_import_s = time.perf_counter() - t0

    from enigma.params import Params
    from enigma.store.experience import ExperienceStore
    from enigma.store.readers import read
    from enigma.store.validation import validate

    config = Params.load("params.yaml").ingest
    config.progress = False
    results = {}
    for fmt, path in SOURCES.items():
        times: dict[str, list[float]] = {"read_s": [], "validate_s": [], "write_s": []}
        for _ in range(args.repeats):
            t = time.perf_counter()
            r = read(fmt, path, config)
            times["read_s"].append(time.perf_counter() - t)
            t = time.perf_counter()
            report = validate(r.dialogues, r.turns, r.spec, config)
            times["validate_s"].append(time.perf_counter() - t)
            with tempfile.TemporaryDirectory() as d:
                t = time.perf_counter()
                ExperienceStore(r.dialogues, r.turns, r.rejects).write(Path(d) / "store")
                times["write_s"].append(time.perf_counter() - t)
        results[fmt] = {
            "dialogues": r.dialogues.num_rows, "turns": r.turns.num_rows, "rejects": r.n_rejects,
            "expectations": len(report.checks), "validation_success": report.success,
            **{k: round(statistics.median(v), 3) for k, v in times.items()},
        }
        print(fmt, results[fmt])
    out = {
        "benchmark": "store_ingest",
        "command": "python studies/store_ingest.py --repeats %d" % args.repeats,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "note": "2 cores shared with other jobs: compare rows of one run, not across runs"},
        "great_expectations_import_s": round(gx_import_s, 3),
        "sources": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "store_ingest.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
