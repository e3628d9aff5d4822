"""scripts/split_table.py --wide, which writes docs/results.md's tables: several committed reports in
one table, each report's halves read from its own summary."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT

AIRLINE = REPO_ROOT / "reports" / "airline" / "summary.json"
HELDOUT = REPO_ROOT / "reports" / "airline-heldout" / "summary.json"
SEE = REPO_ROOT / "reports" / "see2019" / "summary.json"


def _wide(*summaries) -> list[str]:
    run = subprocess.run([sys.executable, "scripts/split_table.py", "--wide", *map(str, summaries)], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip().splitlines()


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_wide_puts_each_reports_halves_side_by_side():
    import json

    lines = _wide(AIRLINE, HELDOUT, SEE)
    head = _cells(lines[0])
    # airline has both halves; airline-heldout is all test, so it has no dev column
    assert head[1:] == ["airline: test (14)", "airline: dev (13)", "airline-heldout: test (16)",
                        "see2019: test (14)", "see2019: dev (13)"], head
    rows = {_cells(l)[0].strip("*"): _cells(l)[1:] for l in lines[2:]}
    a, s = json.loads(AIRLINE.read_text()), json.loads(SEE.read_text())
    # the rows follow the first report's test-half ranking, then what the others add
    assert list(rows)[: len(a["split_ranking"]["test"])] == [r["estimator"] for r in a["split_ranking"]["test"]]
    test = a["estimators"]["enigma"]["split"]["test"]
    assert rows["enigma"][0] == f"{test['mean_pearson']:.3f} [{test['mean_pearson_ci95'][0]:.2f}, {test['mean_pearson_ci95'][1]:.2f}]"
    assert rows["enigma"][3].startswith(f"{s['estimators']['enigma']['split']['test']['mean_pearson']:.3f} [")
    # an estimator a report does not run is blank there, not zero
    only_airline = next(e for e in a["estimators"] if e not in s["estimators"])
    assert rows[only_airline][3:] == ["", ""]
