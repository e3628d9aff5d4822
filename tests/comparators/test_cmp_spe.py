import numpy as np
import pytest
import torch

from enigma.comparators.config import ComparatorsConfig, SpeConfig
from enigma.comparators.spe import SigmoidHead, SpeRidge, SpeSigmoid, masked_mse, mean_reply_embeddings
from enigma.comparators.dialogues import logged_dialogues
from enigma.contracts import HeldOutAgent, Regime


class WordCounts:
    """A bag-of-words embedder over a fixed vocabulary: enough to test the plumbing."""

    vocab = ["dogs", "cats", "travel", "music", "?"]

    def embed(self, texts):
        return np.array([[t.count(w) for w in self.vocab] for t in texts], dtype=np.float32)


def _world(store_factory):
    # quality rises with talk of travel and music, falls with dogs
    rows = []
    for agent, topic, q in [("a", "travel", 0.9), ("b", "dogs", 0.2), ("c", "music", 0.8), ("d", "dogs dogs", 0.1), ("e", "travel music", 0.95)]:
        for i in range(5):
            rows.append((f"{agent}{i}", agent, [("user", "hi"), ("agent", f"i like {topic}"), ("user", "ok"), ("agent", f"more {topic} {i}")], {"quality": q, "fun": q / 2}))
    return store_factory(rows, rating_names=("quality", "fun"))


def test_mean_reply_embeddings_average_the_scored_turns(store_factory):
    store = _world(store_factory)
    d = logged_dialogues(store.filter_agents(keep={"d"}))[0]
    m = mean_reply_embeddings([d], WordCounts())
    assert m.shape == (1, 5) and m[0, 0] == pytest.approx(2.0)


def test_masked_mse_skips_unrated_entries():
    pred = torch.tensor([[0.5, 0.5], [0.0, 1.0]])
    y = torch.tensor([[1.0, float("nan")], [0.0, 0.0]])
    assert float(masked_mse(pred, y)) == pytest.approx((0.25 + 0 + 1) / 3)


def test_sigmoid_head_shape_and_range():
    head = SigmoidHead(7, 3)
    out = head(torch.randn(4, 7) * 100).detach()
    assert out.shape == (4, 3) and float(out.min()) >= 0 and float(out.max()) <= 1


@pytest.mark.parametrize("cls", [SpeRidge, SpeSigmoid])
def test_spe_ranks_held_out_agents_by_their_rollouts(store_factory, cls):
    store = _world(store_factory)
    cfg = ComparatorsConfig(spe=SpeConfig(ridge_alpha=0.1, head_epochs=400, head_lr=0.05))
    est = cls(Regime.OWN_ROLLOUTS, cfg, WordCounts())
    assert est.regimes == frozenset({Regime.OWN_ROLLOUTS})
    experience = store.filter_agents(keep={"b", "c", "d"})
    good = est.estimate(experience, HeldOutAgent("a", rollouts=store.filter_agents(keep={"e"}))).estimates
    bad = est.estimate(experience, HeldOutAgent("x", rollouts=store.filter_agents(keep={"d"}))).estimates
    assert set(good) == {"quality", "fun"}
    assert good["quality"] > bad["quality"] + 0.3 and good["fun"] > bad["fun"]


@pytest.mark.slow
def test_spe_with_the_real_minilm_cache(store_factory, tmp_path):
    store = _world(store_factory)
    cfg = ComparatorsConfig(cache_dir=str(tmp_path))
    est = SpeRidge(Regime.OWN_ROLLOUTS, cfg)
    got = est.estimate(store.without_agent("e"), HeldOutAgent("e", rollouts=store.filter_agents(keep={"e"}))).estimates
    assert 0.0 < got["quality"] < 1.2
