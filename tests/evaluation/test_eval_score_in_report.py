"""``score_in_report``: an estimator of a committed report, scored again from its summary, gives
the report's own numbers (the scripts that pair rows and commits rely on it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from enigma.evaluation.summary_file import read_summary, score_in_report

REPORT = Path(__file__).resolve().parents[2] / "reports" / "airline" / "summary.json"


def test_a_report_scored_again_gives_its_own_correlations_and_ranking():
    summary = read_summary(REPORT)
    for entry in summary["ranking"][:3]:
        score = score_in_report(summary, entry["estimator"])
        assert score.means["pearson"] == pytest.approx(entry["mean_pearson"], abs=1e-9)
        for r in summary["ratings"]:
            assert score.per_rating[r]["pearson"] == pytest.approx(summary["estimators"][entry["estimator"]][r]["pearson"], abs=1e-9)
