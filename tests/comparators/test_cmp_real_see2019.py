"""Checks on the real See 2019 logs (slow: reads the data, no model)."""

import numpy as np
import pytest

from enigma.comparators.dialogues import logged_dialogues, rating_matrix
from enigma.comparators.features import FeatureExtractor
from enigma.comparators.handcrafted import DialogueFeatureEstimator
from enigma.contracts import HeldOutAgent, Regime

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def see(raw_data):
    from enigma.params import Params
    from enigma.store.experience import ExperienceStore
    from enigma.store.readers import see2019, see2019_selfplay
    from tests.conftest import REPO_ROOT

    cfg = Params.load(REPO_ROOT / "params.yaml").ingest
    root = raw_data / "see2019_convai2_humaneval"
    r = see2019.read(root, cfg)
    s = see2019_selfplay.read(root, cfg)
    return ExperienceStore(r.dialogues, r.turns, r.rejects), ExperienceStore(s.dialogues, s.turns, s.rejects)


def test_self_repetition_goes_with_a_low_avoid_rep_rating(see):
    store, _ = see
    x = FeatureExtractor().matrix(logged_dialogues(store), ["self_repetition"])[:, 0]
    y = rating_matrix(store, ["avoid_rep"])[:, 0]
    ok = np.isfinite(y)
    # raters mark bots that repeat themselves as repetitive (avoid_rep low)
    assert np.corrcoef(x[ok], y[ok])[0, 1] < -0.2


def test_feature_estimator_on_a_held_out_bot_with_its_self_play(see):
    store, selfplay = see
    agent = "repetition_model_setting05"
    est = DialogueFeatureEstimator(("self_repetition", "question_rate", "length"), Regime.OWN_ROLLOUTS)
    result = est.estimate(store.without_agent(agent), HeldOutAgent(agent, rollouts=selfplay.filter_agents(keep={agent})))
    got = result.estimates
    assert set(got) == set(store.rating_names)
    assert all(0.0 < v < 1.0 for v in got.values())
    assert result.diagnostics["n_dialogues"] == selfplay.filter_agents(keep={agent}).dialogues.num_rows
