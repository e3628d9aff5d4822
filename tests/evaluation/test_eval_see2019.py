"""The protocol and report on the real See 2019 logs (slow: reads 3,316 chats)."""

from __future__ import annotations

import pytest

from tests.conftest import REPO_ROOT

from enigma.comparators.baselines import ExperienceMean
from enigma.evaluation.config import ReportConfig
from enigma.evaluation.loao import run_loao
from enigma.evaluation.summary import build_summary
from enigma.evaluation.truth import truth_from_store
from enigma.params import Params
from enigma.store.experience import ExperienceStore
from enigma.store.readers import see2019


@pytest.mark.slow
def test_experience_mean_collapse_is_visible_on_see2019(raw_data):
    r = see2019.read(raw_data / "see2019_convai2_humaneval", Params.load(REPO_ROOT / "params.yaml").ingest)
    store = ExperienceStore(r.dialogues, r.turns, r.rejects)
    results = run_loao(store, [ExperienceMean()], progress=False)
    summary, _ = build_summary(results, truth_from_store(store), "see2019", ReportConfig(bootstrap_resamples=100, plots=False))
    e = summary["estimators"]["experience-mean"]
    assert summary["n_agents"] == 29 and e["n_agents"] == 29
    # The other agents' mean moves against the held-out agent's own: close to -1 everywhere.
    assert e["mean_pearson"] < -0.99
    assert all(e[r]["spread_ratio"] < 0.05 for r in summary["ratings"])
    assert len([f for f in e["flags"] if "collapse" in f]) == len(summary["ratings"])
