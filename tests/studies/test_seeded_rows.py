"""studies/seeded_rows.py: the three-seed rules' residual after leave-one-out recalibration, the
between-seed sd, and the result files they read."""

from __future__ import annotations

import importlib
import json
import math

import pytest

from tests.conftest import REPO_ROOT


@pytest.fixture
def seeded_rows(monkeypatch):
    """The module as ``python studies/<script>.py`` imports it (its bare sibling imports need the
    studies folder on sys.path)."""
    monkeypatch.syspath_prepend(str(REPO_ROOT / "studies"))
    return importlib.import_module("seeded_rows")


def test_estimates_an_affine_map_of_the_truth_leave_no_residual_and_one_outlier_shows_as_its_own(seeded_rows):
    recalibrated = seeded_rows.recalibrated
    truth = {f"a{i}": 0.5 + 0.04 * i for i in range(10)}
    exact = recalibrated({a: 2.0 * t - 0.3 for a, t in truth.items()}, truth)
    assert exact["rms"] == pytest.approx(0.0, abs=1e-9)
    off = recalibrated({a: 2.0 * t - 0.3 + (0.2 if a == "a4" else 0.0) for a, t in truth.items()}, truth)
    # an estimate 0.2 too high on the 2x scale is 0.1 too high in truth units, read by a fit without it
    assert off["residual"]["a4"] == pytest.approx(-0.1, abs=1e-9)
    assert max(abs(v) for a, v in off["residual"].items() if a != "a4") > 0  # the others' fits did see it
    assert off["rms"] == pytest.approx(math.sqrt(sum(v**2 for v in off["residual"].values()) / 10))


def test_seed_sd_is_the_root_mean_over_agents_of_each_agents_variance_across_seeds(seeded_rows):
    runs = [{"x": {"reward": 0.1}, "y": {"reward": 0.5}},
            {"x": {"reward": 0.3}, "y": {"reward": 0.5}}]
    # x: variance (n-1) of 0.1, 0.3 = 0.02; y: 0
    assert seeded_rows.seed_sd(runs) == pytest.approx(math.sqrt(0.01))


def test_load_reads_the_set_study_and_seed_tag_and_says_none_for_a_run_not_made(seeded_rows, tmp_path, monkeypatch):
    load = seeded_rows.load
    monkeypatch.setattr(seeded_rows, "RESULTS", tmp_path)
    (tmp_path / "dev_rows_airline_delay3_study_x_s1.json").write_text(json.dumps({"rows": {}}))
    assert load("airline-delay3", "study_x", 1) == {"rows": {}}
    assert load("airline-delay3", "study_x", 2) is None
    assert load("airline-delay3", "study_x") is None


def test_the_rules_means_read_the_delayed_stores_and_the_k0_halves_apart(seeded_rows):
    means = {"airline": 0.01, "airline-seed1": -0.02, "see2019": 0.04, "airline-delay3": 0.02, "airline-delay8": 0.06}
    got = seeded_rows.rule_means(means)
    assert got == pytest.approx({"delayed_mean": 0.04, "k0_mean": 0.01, "k0_lowest": -0.02})


def test_pooled_verdicts_weigh_each_cells_power_by_its_pairs_and_keep_the_halves_apart(seeded_rows):
    cell = lambda power, big, wrong, called: {"power": power, "big": big, "wrong": wrong, "called": called}  # noqa: E731
    cells = {"airline/s0": {"ref": cell(0.5, 10, 1, 6), "cand": cell(0.6, 10, 0, 7)},
             "see2019/s0": {"ref": cell(0.2, 30, 2, 9), "cand": cell(None, 0, 0, 0)},
             "airline-delay8/s0": {"ref": cell(0.0, 5, 0, 1), "cand": cell(0.4, 5, 1, 3)}}
    k0, late = seeded_rows.pooled_verdict_lines(cells, "ref", "cand")
    # k = 0: ref (0.5 * 10 + 0.2 * 30) / 40 = 27.5%; cand 6 / 10 = 60.0% (a cell without big-gap pairs adds none)
    assert "`ref` power 27.5% of 40, wrong 3 of 15 called" in k0 and "`cand` power 60.0% of 10, wrong 0 of 7 called" in k0
    assert "`ref` power 0.0% of 5, wrong 0 of 1 called" in late and "`cand` power 40.0% of 5, wrong 1 of 3 called" in late
