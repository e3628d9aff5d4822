"""The checkpoint benchmark's report figures (``enigma.evaluation.checkpoints``) on numbers whose
answers are known: the consecutive pairs of each training run, correlations and errors against the
truth, the calibrated interval's coverage, and the verdicts' counts."""

from __future__ import annotations

import numpy as np
import pytest

from enigma.evaluation import calibration as calib
from enigma.evaluation.checkpoints import consecutive_pairs, markdown, rating_figures


def test_consecutive_pairs_follow_each_run_in_step_order():
    names = ["b-2", "a-10", "a-1", "b-1", "a-5"]
    runs = {n: n.split("-")[0] for n in names}
    steps = {n: int(n.split("-")[1]) for n in names}
    assert consecutive_pairs(names, runs, steps) == [("b-2", "b-1"), ("a-5", "a-1"), ("a-10", "a-5")]


def test_figures_against_a_known_truth():
    # calibration agents whose estimates are their truths plus a constant 0.1: a = -0.1, b = 1, no residual spread
    store_truth = {f"s{i}": 0.1 * i for i in range(8)}
    cal = calib.fit([v + 0.1 + (0.01 if i % 2 else -0.01) for i, v in enumerate(store_truth.values())],
                    list(store_truth.values()), list(store_truth))
    truths = {"c1": 0.2, "c2": 0.5, "c3": 0.8}
    estimates = {"c1": 0.3, "c2": 0.6, "c3": 0.95}
    f = rating_figures(estimates, truths, cal, [("c2", "c1"), ("c3", "c2")], 0.95)
    assert f["pearson"] == pytest.approx(np.corrcoef([0.3, 0.6, 0.95], [0.2, 0.5, 0.8])[0, 1]) and f["spearman"] == pytest.approx(1.0)
    assert f["mae"] == pytest.approx((0.1 + 0.1 + 0.15) / 3)
    assert f["calibrated"]["calibration_agents"] == 8 and f["calibrated"]["b"] == pytest.approx(1.0, abs=0.05)
    assert f["calibrated"]["mae"] == pytest.approx(0.0167, abs=0.02)
    assert f["calibrated"]["coverage"] == pytest.approx(2 / 3) and f["calibrated"]["missed"] == ["c3"]
    # gaps of 0.3 and 0.6 far beyond the calibration's spread: every pair called, the right way
    assert f["verdicts_all_pairs"] == {"pairs": 3, "called": 3, "wrong": 0, "wrong_rate": 0.0, "power_gap_0_05": 1.0,
                                       "pairs_gap_0_05": 3}
    assert f["verdicts_consecutive"]["pairs"] == 2 and [c["verdict"] for c in f["consecutive"]] == ["better", "better"]


def test_a_checkpoint_without_an_estimate_is_named_not_counted():
    cal = calib.fit([0.1, 0.5, 0.9, 0.3], [0.1, 0.5, 0.9, 0.3], ["a", "b", "c", "d"])
    f = rating_figures({"c1": 0.3, "c2": float("nan")}, {"c1": 0.2, "c2": 0.5, "c3": 0.4}, cal, [], 0.95)
    assert f["n_checkpoints"] == 1 and f["missing"] == ["c2", "c3"] and f["mae"] == pytest.approx(0.1)
    s = {"note": "n", "scored_on": "x", "level": 0.95, "ratings": ["reward"], "estimators": {"e": {"reward": f}},
         "checkpoints": [{"name": "c1", "mix": "all", "step": 1, "train_loss": 2.0, "truth": {"reward": 0.2},
                          "truth_stderr": {"reward": 0.01}, "truth_dialogues": 2000}]}
    md = markdown(s, "t")
    assert "| e | n/a | n/a | 0.100 |" in md and "| c1 | all | 1 | 2.000 | 0.200 ± 0.010 | 2000 |" in md


def test_the_page_renders_its_tables(tmp_path):
    from enigma.evaluation.checkpoints import write_report

    cal = calib.fit([0.1, 0.5, 0.9, 0.3], [0.1, 0.5, 0.9, 0.3], ["a", "b", "c", "d"])
    f = rating_figures({"c1": 0.3}, {"c1": 0.2}, cal, [], 0.95)
    s = {"note": None, "scored_on": "x", "level": 0.95, "ratings": ["reward"], "estimators": {"e": {"reward": f}},
         "checkpoints": [{"name": "c1", "mix": "all", "step": 1, "train_loss": 2.0, "truth": {"reward": 0.2},
                          "truth_stderr": {"reward": 0.01}, "truth_dialogues": 2000}]}
    page = write_report(s, tmp_path, "t").read_text()
    assert page.count("<table>") == 2 and "<td>e</td>" in page and "| e |" not in page
    assert '<a href="summary.json">' in page and (tmp_path / "summary.json").is_file()


def test_each_checkpoints_degenerate_cut_and_no_action_share_is_shown():
    """The checkpoints' table says, per checkpoint, how much of its sample was degenerate or cut at
    the length limit and how many kept dialogues had no action; n/a where it was not recorded."""
    cal = calib.fit([0.1, 0.5, 0.9, 0.3], [0.1, 0.5, 0.9, 0.3], ["a", "b", "c", "d"])
    f = rating_figures({"c1": 0.3, "c2": 0.4}, {"c1": 0.2, "c2": 0.5}, cal, [], 0.95)
    row = {"mix": "all", "train_loss": 2.0, "truth": {"reward": 0.2}, "truth_stderr": {"reward": 0.01}, "truth_dialogues": 40}
    s = {"note": None, "scored_on": "x", "level": 0.95, "ratings": ["reward"], "estimators": {"e": {"reward": f}},
         "checkpoints": [{"name": "c1", "step": 1, **row, "replies": {
                             "degenerate": {"replies": 200, "empty": 30, "repeated": 20, "share": 0.25, "at_token_limit": 80},
                             "kept_dialogues": 20, "no_action": 7}},
                         {"name": "c2", "step": 2, **row, "replies": {
                             "degenerate": {"replies": 200, "empty": 0, "repeated": 0, "share": 0.0},
                             "kept_dialogues": 20, "no_action": 0}}]}
    md = markdown(s, "t")
    assert "| dialogues | degenerate | cut | no action |" in md
    assert "| c1 | all | 1 | 2.000 | 0.200 ± 0.010 | 40 | 25% | 40% | 7/20 |" in md
    assert "| c2 | all | 2 | 2.000 | 0.200 ± 0.010 | 40 | 0% | n/a | 0/20 |" in md
