"""studies/longer_fits.py's time rows: the candidate's seconds over the fresh reference's, and
whether that fresh reference is the reused rows' default to the bit."""

from __future__ import annotations

import importlib

import pytest

from tests.conftest import REPO_ROOT


@pytest.fixture
def longer_fits(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO_ROOT / "studies"))
    return importlib.import_module("longer_fits")


def test_time_check_divides_the_medians_and_compares_the_fresh_reference_to_the_reused_one_exactly(longer_fits):
    est = {"a": {"reward": 0.81}, "b": {"reward": 0.62}}
    run = {"rows": {"e2x45": {"seconds_per_agent_median": 20.0, "estimates": est},
                    "e2x60": {"seconds_per_agent_median": 25.0, "estimates": est}}}
    reused = {"rows": {"e2x45": {"estimates": {"a": {"reward": 0.81}, "b": {"reward": 0.62}}}}}
    assert longer_fits.time_check(run, reused) == {"ratio": 1.25, "reference_same_bits": True}
    moved = {"rows": {"e2x45": {"estimates": {"a": {"reward": 0.81}, "b": {"reward": 0.6200001}}}}}
    assert longer_fits.time_check(run, moved)["reference_same_bits"] is False
    assert longer_fits.time_check(run, None)["reference_same_bits"] is False


def test_a_rule_condition_not_met_decides_without_the_time_rows(longer_fits, monkeypatch):
    sets = ["airline", "airline-seed1", "see2019", "airline-delay3", "airline-delay8"]
    means = dict(zip(sets, [0.005, 0.001, -0.011, 0.011, 0.023]))
    monkeypatch.setattr(longer_fits, "collect", lambda *a: ({}, means, {}))
    monkeypatch.setattr(longer_fits, "load", lambda *a: None)  # no time rows
    monkeypatch.setattr(longer_fits, "row_lines", lambda *a: [])
    monkeypatch.setattr(longer_fits, "quantity_lines", lambda *a: [])
    monkeypatch.setattr(longer_fits, "pooled_verdict_lines", lambda *a: [])
    written = {}
    monkeypatch.setattr(longer_fits, "write_result", lambda tag, lines, payload: written.update(payload))
    monkeypatch.setattr("sys.argv", ["longer_fits.py"])
    longer_fits.main()
    out = written["outcome"]
    # the delayed stores' mean +0.017 is below +0.020: not eligible, whatever the time rows would say
    assert out["decided"] is True and out["eligible"] is False
    assert out["conditions"] == {"1 delayed mean >= +0.020": False, "2 k0 mean >= -0.005 and none < -0.015": True}
