import numpy as np
import pytest
import torch

from enigma.comparators.config import ComparatorsConfig, DynaEvalConfig
from enigma.comparators.dynaeval import (
    DynaEvalEstimator,
    DynaEvalModel,
    margin_ranking_loss,
    relation_adjacency,
    speaker_shuffle,
    utterance_replacement,
)
from enigma.contracts import HeldOutAgent, Regime


def test_utterance_replacement_swaps_the_share_for_pool_utterances():
    rng = np.random.default_rng(0)
    ids = list(range(10))
    pool = np.array([100, 101, 102])
    out = utterance_replacement(ids, pool, rng, share=0.3)
    changed = [i for i, (a, b) in enumerate(zip(ids, out)) if a != b]
    assert len(changed) == 3 and all(out[i] in pool for i in changed)
    assert len(out) == len(ids)
    # at least one utterance is replaced even for a tiny share
    assert sum(a != b for a, b in zip([1, 2], utterance_replacement([1, 2], pool, rng, 0.01))) == 1


def test_speaker_shuffle_reorders_one_speaker_only():
    rng = np.random.default_rng(1)
    ids = [10, 20, 11, 21, 12, 22]
    roles = [0, 1, 0, 1, 0, 1]
    for _ in range(20):
        out = speaker_shuffle(ids, roles, rng)
        assert out != ids and sorted(out) == sorted(ids)
        moved = {roles[i] for i in range(6) if out[i] != ids[i]}
        assert len(moved) == 1  # one speaker moved, the other's utterances stayed in place
        assert all(roles[ids.index(v)] == roles[i] for i, v in enumerate(out))
    assert speaker_shuffle([1, 2], [0, 1], rng) is None  # one utterance each: nothing to reorder


def test_relation_adjacency_types_and_window():
    roles = torch.tensor([[0, 1, 0, 1]])
    mask = torch.tensor([[True, True, True, False]])
    adj = relation_adjacency(roles, mask, window=1)
    assert adj.shape == (1, 4, 4, 4)
    # utterance 1 (agent): 0 is other-speaker earlier (rel 2), 2 is other-speaker later (rel 3)
    assert adj[0, 2, 1, 0] == 1 and adj[0, 3, 1, 2] == 1
    assert adj[0, :, 1, 3].sum() == 0  # padding is never a neighbour
    assert adj[0, :, 0, 2].sum() == 0  # outside the window
    adj2 = relation_adjacency(roles, torch.ones(1, 4, dtype=torch.bool), window=2)
    assert adj2[0, 0, 2, 0] == 1  # same speaker, earlier


def test_model_scores_ignore_padding():
    torch.manual_seed(0)
    m = DynaEvalModel(d_in=5, hidden=4, window=2).eval()
    torch.set_grad_enabled(False)
    x = torch.randn(1, 3, 5)
    roles = torch.tensor([[0, 1, 0]])
    s1 = m(x, roles, torch.ones(1, 3, dtype=torch.bool))
    xp = torch.cat([x, torch.randn(1, 2, 5)], dim=1)
    s2 = m(xp, torch.tensor([[0, 1, 0, 1, 1]]), torch.tensor([[True, True, True, False, False]]))
    torch.set_grad_enabled(True)
    assert s1.shape == (1,) and float(s1) == pytest.approx(float(s2), abs=1e-5)


def test_margin_ranking_loss():
    pos, neg = torch.tensor([2.0, 0.0]), torch.tensor([0.5, 0.0])
    assert float(margin_ranking_loss(pos, neg, 1.0)) == pytest.approx((0 + 1) / 2)


def test_dynaeval_trains_without_ratings_and_returns_one_score(store_factory, word_counts):
    rows = []
    topics = ["dogs", "cats", "travel", "music"]
    for i in range(24):
        t = topics[i % 4]
        turns = [("user", "hi"), ("agent", f"hi {t}"), ("user", f"{t} ok"), ("agent", f"{t} {t} ?"), ("user", f"ok {t}"), ("agent", "ok")]
        rows.append((f"d{i}", f"a{i % 3}", turns, {"quality": None, "fun": None}))  # unrated: label-free
    store = store_factory(rows, rating_names=("quality", "fun"))
    cfg = ComparatorsConfig(dynaeval=DynaEvalConfig(hidden=8, epochs=8, batch_size=8, lr=0.01))
    est = DynaEvalEstimator(Regime.OWN_ROLLOUTS, cfg, word_counts)
    result = est.estimate(store.without_agent("a0"), HeldOutAgent("a0", rollouts=store.filter_agents(keep={"a0"})))
    got = result.estimates
    assert set(got) == {"quality", "fun"} and got["quality"] == got["fun"]
    assert result.diagnostics["final_loss"] < cfg.dynaeval.margin  # it learned to rank real above corrupted
