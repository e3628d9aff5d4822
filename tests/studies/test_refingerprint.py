"""studies/refingerprint.py, the one-off migration of saved results to the full-config
estimator fingerprint (issue 59): it rewrites the middle part of a result file's fingerprint and
not one other byte, leaves a result of other settings alone, and a rerun changes nothing."""

from __future__ import annotations

import json

import pytest

from enigma.contracts import EstimateResult
from enigma.evaluation.results import read_saved, result_path, write_result
from studies.refingerprint import migrate_folder, rewrite_fingerprint

OLD, NEW = "a" * 16, "b" * 16


def _result(results_dir, estimator: str, agent: str, fingerprint: str):
    """A result file as the train stage writes it (non-ASCII and non-finite values included, so
    a rewrite that re-serialised the file differently would show)."""
    rows = [{"estimator": estimator, "agent_id": agent, "rating": "reward", "estimate": 0.1 + 0.2, "unnormalised": float("nan"),
             "ess": None, "interval_low": None, "interval_high": None, "regime": "replies-at-logged-states",
             "labels": json.dumps({"note": "café"}), "diagnostics": "{}", "n_experience_dialogues": 3, "seconds": 1.5, "error": None}]
    path = result_path(results_dir, estimator, agent)
    write_result(path, fingerprint, rows, EstimateResult({"reward": 0.3}))
    return path


def test_the_rewrite_changes_the_fingerprint_and_nothing_else(tmp_path):
    path = _result(tmp_path, "see-features:ridge[own-rollouts]", "agent 1", f"s-{OLD}-t")
    before = path.read_bytes()
    rewrite_fingerprint(path, f"s-{OLD}-t", f"s-{NEW}-t")
    after = path.read_bytes()
    assert after == before.replace(OLD.encode(), NEW.encode()) and after != before
    assert read_saved(path, f"s-{NEW}-t") is not None and read_saved(path, f"s-{OLD}-t") is None
    assert [p.name for p in path.parent.iterdir() if ".tmp" in p.name] == []  # the temporary file was renamed
    with pytest.raises(ValueError, match="does not start with fingerprint"):  # not the fingerprint it has: untouched
        rewrite_fingerprint(path, f"s-{OLD}-t", "x")
    assert path.read_bytes() == after


def test_a_folder_migrates_the_old_key_only_and_a_rerun_changes_nothing(tmp_path):
    old = _result(tmp_path, "enigma", "a1", f"s1-{OLD}-t1")
    stale = _result(tmp_path, "enigma", "a2", f"s2-{'c' * 16}-t2")  # other settings: the train stage recomputes it
    failed = _result(tmp_path, "enigma", "a3", "failed")
    other = _result(tmp_path, "retired", "a1", f"s1-{OLD}-t1")  # an estimator no benchmark runs
    untouched = {p: p.read_bytes() for p in (stale, failed, other)}
    counts = migrate_folder(tmp_path, {"enigma": OLD}, {"enigma": NEW})
    assert counts == {"migrated": 1, "already": 0, "changed": 0, "stale": 2, "unknown": 1}
    assert json.loads(old.read_text())["fingerprint"] == f"s1-{NEW}-t1"
    assert all(p.read_bytes() == b for p, b in untouched.items())
    assert migrate_folder(tmp_path, {"enigma": OLD}, {"enigma": NEW}) == {"migrated": 0, "already": 1, "changed": 0, "stale": 2, "unknown": 1}


def test_a_setting_added_to_a_part_migrates_only_at_its_default():
    """A result recorded before a field was added to a nested part (fqe's dict) is carried over
    when the field's default is what the estimator runs; not when the recorded value differs."""
    from types import SimpleNamespace

    from enigma.ope.config import DiceConfig
    from studies.refingerprint import recorded_config

    est = SimpleNamespace(name="enigma", config=DiceConfig.from_section({"fqe": {"agreement": False}}))
    now = est.config.flat()
    assert now["fqe"]["history"] is False
    before = {**now, "fqe": {k: v for k, v in now["fqe"].items() if k != "history"}}
    assert recorded_config(before, est) == now
    with pytest.raises(ValueError, match="fqe"):
        recorded_config({**now, "fqe": {**now["fqe"], "ensemble": now["fqe"]["ensemble"] + 1}}, est)
    with pytest.raises(ValueError, match="fqe"):  # the old one had a key the new one lacks: not an added setting
        recorded_config({**now, "fqe": {**now["fqe"], "unknown": 1}}, est)


def test_a_result_whose_settings_changed_is_left_to_recompute(tmp_path):
    """The estimator's fingerprint moved because one of its settings changed (not only their
    form): its result keeps the old key, so the train stage recomputes it, instead of carrying an
    old number over under the new settings."""
    from types import SimpleNamespace

    from enigma.ope.config import DiceConfig

    est = SimpleNamespace(name="enigma", config=DiceConfig.from_section({"fqe": {"agreement": False}}))
    recorded = {**est.config.flat(), "fqe": {**est.config.flat()["fqe"], "ensemble": 7}}
    path = _result(tmp_path, "enigma", "a1", f"s1-{OLD}-t1")
    saved = json.loads(path.read_text())
    saved["rows"][0]["diagnostics"] = json.dumps({"config": recorded})
    path.write_text(json.dumps(saved, indent=1))
    before = path.read_bytes()
    counts = migrate_folder(tmp_path, {"enigma": OLD}, {"enigma": NEW}, estimators={"enigma": est})
    assert counts == {"migrated": 0, "already": 0, "changed": 1, "stale": 0, "unknown": 0}
    assert path.read_bytes() == before
