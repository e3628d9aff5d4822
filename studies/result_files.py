"""A benchmark's result files: studies/results/<tag>.md (the table a reader reads) and
<tag>.json (the numbers and the command that made them), and the paired-difference cell the
paired tables share."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def paired_cell(diff: dict[str, Any] | None) -> str:
    """A paired difference as a table cell, "+0.012 [-0.003, +0.030]"; empty for the reference row."""
    if not diff:
        return ""
    return f"{diff['difference']:+.3f} [{diff['ci95'][0]:+.3f}, {diff['ci95'][1]:+.3f}]"


def write_result(tag: str, lines: list[str], payload: dict[str, Any], out: Path = RESULTS) -> None:
    """Write <tag>.md from ``lines`` and <tag>.json from ``payload`` in ``out``, and print the table."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{tag}.md").write_text("\n".join(lines) + "\n")
    (out / f"{tag}.json").write_text(json.dumps(payload, indent=2, default=float))
    sys.stdout.write("\n".join(lines) + "\n")
