"""studies/result_files.py and the per-estimate moves of studies/cold_rebuild_shift.py."""

from __future__ import annotations

import json

from studies.cold_rebuild_shift import estimate_moves
from studies.result_files import paired_cell, write_result


def test_a_paired_difference_is_one_cell_and_the_reference_row_gets_none():
    assert paired_cell({"difference": 0.0123, "ci95": [-0.003, 0.03]}) == "+0.012 [-0.003, +0.030]"
    assert paired_cell(None) == ""


def test_the_table_and_the_numbers_go_to_their_two_files(tmp_path, capsys):
    write_result("t", ["| a |", "|---|"], {"x": 1.5}, tmp_path)
    assert (tmp_path / "t.md").read_text() == "| a |\n|---|\n"
    assert json.loads((tmp_path / "t.json").read_text()) == {"x": 1.5}
    assert "| a |" in capsys.readouterr().out


def test_estimate_moves_are_over_every_agent_and_rating_both_reports_hold():
    old = {"agents": {"a1": {"r": {"truth": 0.5, "e": 0.10, "f": 0.3}, "s": {"truth": 0.1, "e": 0.20}},
                      "a2": {"r": {"truth": 0.7, "e": 0.40}}}}
    new = {"agents": {"a1": {"r": {"truth": 0.5, "e": 0.13, "f": 0.3}, "s": {"truth": 0.1, "e": 0.20}},
                      "a3": {"r": {"truth": 0.9, "e": 9.0}}}}  # a2 and a3 are in one report only
    moves = estimate_moves(old, new)
    assert set(moves) == {"e", "f"}  # the truth is not an estimator
    largest, median = moves["e"]
    assert abs(largest - 0.03) < 1e-12 and abs(median - 0.015) < 1e-12
    assert moves["f"] == (0.0, 0.0)
