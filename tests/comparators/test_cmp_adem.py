import numpy as np
import pyarrow as pa
import pytest
import torch

from enigma.comparators.adem import AdemEstimator, AutoJudgeEstimator, BilinearScorer, adem_loss, calibrate, turn_triples
from enigma.comparators.config import AdemConfig, ComparatorsConfig
from enigma.comparators.dialogues import logged_dialogues
from enigma.contracts import HeldOutAgent, Regime


def test_bilinear_shapes_identity_start_and_formula():
    m = BilinearScorer(3, 2, use_reference=True)
    c = torch.tensor([[1.0, 0, 0]])
    r = torch.tensor([[0.0, 2, 0]])
    rh = torch.tensor([[1.0, 1, 0]])
    out = m(c, r, rh)
    assert out.shape == (1, 2)
    # identity M, N: c·r̂ + r·r̂ = 1 + 2
    assert out.tolist() == [[3.0, 3.0]]
    m.alpha.fill_(1.0)
    m.beta.fill_(2.0)
    assert m(c, r, rh).tolist() == [[1.0, 1.0]]
    aj = BilinearScorer(3, 2, use_reference=False)
    assert aj.N is None and aj(c, r, rh).tolist() == [[1.0, 1.0]]


def test_adem_loss_is_masked_mse_plus_l2():
    m = BilinearScorer(2, 2, use_reference=False)
    c = torch.tensor([[1.0, 0.0]])
    rh = torch.tensor([[1.0, 0.0]])
    y = torch.tensor([[0.0, float("nan")]])
    # prediction 1 for both ratings, only the first is rated: error 1; ‖M‖² = 2 identities = 4
    assert float(adem_loss(m, c, None, rh, y, l2=0.5).detach()) == pytest.approx(1.0 + 0.5 * 4)


def test_calibration_matches_the_labels_mean_and_spread():
    torch.manual_seed(0)
    m = BilinearScorer(4, 1, use_reference=False)
    c, rh = torch.randn(50, 4), torch.randn(50, 4)
    y = np.random.default_rng(0).uniform(0.2, 0.8, size=(50, 1))
    calibrate(m, c, None, rh, y)
    with torch.no_grad():
        s = m(c, None, rh).numpy()
    assert s.mean() == pytest.approx(y.mean(), abs=1e-5) and s.std() == pytest.approx(y.std(), abs=1e-5)


def _world(store_factory):
    rows = []
    for agent, topic, q in [("a", "travel", 0.9), ("b", "dogs", 0.2), ("c", "music", 0.8), ("d", "dogs cats", 0.1)]:
        for i in range(6):
            rows.append((f"{agent}{i}", agent, [("user", "hi"), ("agent", f"i like {topic}"), ("user", "ok"), ("agent", f"so {topic}")], {"quality": q}))
    return store_factory(rows)


def test_turn_triples_take_the_context_window_and_reference(store_factory):
    d = logged_dialogues(_world(store_factory).filter_agents(keep={"a"}))[:1]
    t = turn_triples(d, context_turns=2)
    assert t.contexts == [("hi",), ("i like travel", "ok")]
    assert t.responses == t.references == ["i like travel", "so travel"]
    assert t.dialogue_row.tolist() == [0, 0]


CFG = ComparatorsConfig(adem=AdemConfig(pca_dim=4, epochs=150, lr=0.05, l2=1e-4))


def test_autojudge_scores_rollouts_by_what_the_other_agents_taught_it(store_factory, word_counts):
    store = _world(store_factory)
    est = AutoJudgeEstimator(Regime.OWN_ROLLOUTS, CFG, word_counts)
    experience = store.filter_agents(keep={"b", "c"})
    good = est.estimate(experience, HeldOutAgent("a", rollouts=store.filter_agents(keep={"c"}))).estimates["quality"]
    bad = est.estimate(experience, HeldOutAgent("d", rollouts=store.filter_agents(keep={"b"}))).estimates["quality"]
    assert good > bad + 0.3


def test_adem_scores_replies_at_logged_states_against_the_logged_reply(store_factory, word_counts):
    store = _world(store_factory)
    experience = store.filter_agents(keep={"b", "c"})
    def acts(text):
        ids = [f"b{i}" for i in range(6)] + [f"c{i}" for i in range(6)]
        return pa.table({"dialog_id": ids, "turn_index": [3] * 12, "sample_index": [0] * 12, "text": [text] * 12})
    est = AdemEstimator(CFG, word_counts)
    assert est.regimes == frozenset({Regime.REPLIES_AT_LOGGED_STATES})
    good = est.estimate(experience, HeldOutAgent("x", target_actions=acts("so music"))).estimates["quality"]
    result = est.estimate(experience, HeldOutAgent("y", target_actions=acts("so dogs")))
    bad = result.estimates["quality"]
    assert good > bad
    assert result.diagnostics["n_target_turns"] == 12
