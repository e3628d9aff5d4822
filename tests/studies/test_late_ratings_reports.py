"""studies/late_ratings_reports.py pairs each delayed report against k = 0 on the same sellers and
resamples: read against itself (the committed airline report three times) every D is exactly 0, and
the two halves are airline's own split of its 27 sellers."""

from __future__ import annotations

from studies.late_ratings_reports import main


def test_a_report_paired_with_itself_moves_by_nothing_and_the_halves_split_the_sellers(tmp_path):
    out = main({0: "airline", 3: "airline", 8: "airline"}, tmp_path)
    assert sorted(out["halves"]["dev"] + out["halves"]["test"]) == sorted(set(out["halves"]["dev"]) | set(out["halves"]["test"]))
    assert len(out["halves"]["dev"]) == 13 and len(out["halves"]["test"]) == 14
    assert "enigma" in out["estimators"]
    for half in ("dev", "test"):
        for name, row in out["rows"][half].items():
            for k in (3, 8):
                assert row["d_vs_k0"][k]["difference"] == 0.0 and row["d_vs_k0"][k]["ci95"] == [0.0, 0.0], (half, name, k)
    text = (tmp_path / "late_ratings_reports.md").read_text()
    assert text.index("dev-half sellers (13)") < text.index("test-half sellers (14)")
