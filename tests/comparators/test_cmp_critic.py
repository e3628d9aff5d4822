import pyarrow as pa
import pytest
import torch

from enigma.comparators.config import ComparatorsConfig, CriticConfig
from enigma.comparators.critic import (
    FqeCriticEstimator,
    QNetwork,
    bellman_targets,
    build_transitions,
    pessimistic_value,
    polyak,
)
from enigma.contracts import HeldOutAgent, Regime


def test_bellman_target_uses_the_rating_at_the_end_and_the_next_value_before():
    next_value = torch.tensor([[0.3, 0.4], [0.9, 0.9]])
    terminal = torch.tensor([False, True])
    reward = torch.tensor([[float("nan"), float("nan")], [0.1, 0.2]])
    y = bellman_targets(next_value, terminal, reward)
    assert torch.allclose(y, torch.tensor([[0.3, 0.4], [0.1, 0.2]]))


def test_pessimism_is_the_minimum_over_dropout_passes():
    torch.manual_seed(0)
    q = QNetwork(4, 16, 2, dropout=0.5)
    x = torch.randn(10, 4)
    low = pessimistic_value(q, x, passes=20)
    torch.manual_seed(1)
    draws = torch.stack([q.train()(x).detach() for _ in range(20)])
    assert (low <= draws.max(dim=0).values).all()
    assert float(low.mean()) < float(draws.mean())
    q0 = QNetwork(4, 16, 2, dropout=0.0)
    assert torch.allclose(pessimistic_value(q0, x, 5), q0(x).detach())


def test_polyak_moves_the_target_a_little():
    a, b = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
    with torch.no_grad():
        a.weight.fill_(0.0)
        b.weight.fill_(1.0)
    polyak(a, b, 0.1)
    assert float(a.weight.detach()) == pytest.approx(0.1)


def _store(store_factory):
    rows = []
    for i in range(8):
        q = 0.9 if i % 2 == 0 else 0.1
        word = "music" if q > 0.5 else "dogs"
        rows.append((f"d{i}", f"a{i % 2}", [("user", "hi"), ("agent", f"i like {word}"), ("user", "ok"), ("agent", f"{word} ?")], {"quality": q}))
    return store_factory(rows)


def _acts(pairs):
    return pa.table({"dialog_id": [p[0] for p in pairs], "turn_index": [p[1] for p in pairs], "sample_index": [0] * len(pairs), "text": [p[2] for p in pairs]})


def test_transitions_use_the_target_reply_at_the_next_state(store_factory):
    store = _store(store_factory)
    acts = _acts([("d0", 1, "i like music"), ("d0", 3, "music ?"), ("d1", 1, "hmm")])
    tr, failed = build_transitions(store, HeldOutAgent("t", target_actions=acts), context_turns=2)
    assert failed == 0 and len(tr.logged_rows) == 16 and tr.terminal.sum() == 8
    first = 0  # d0's first agent turn: its successor is the target's reply at turn 3
    assert [tr.sa[r] for r in tr.next_rows[first]] == [(("i like music", "ok"), "music ?")]
    assert tr.n_fallback == 7  # d1..d7 have no target reply at turn 3: valued at the logged one
    assert [tr.sa[r][1] for g in tr.opening_rows for r in g] == ["i like music", "hmm"]


def test_fqe_critic_values_the_target_by_its_opening_replies(store_factory, word_counts):
    store = _store(store_factory)
    cfg = ComparatorsConfig(critic=CriticConfig(hidden=16, epochs=60, batch_size=8, lr=0.01, tau=0.1, dropout=0.1, dropout_passes=3))
    est = FqeCriticEstimator(cfg, word_counts)
    assert est.regimes == frozenset({Regime.REPLIES_AT_LOGGED_STATES})
    ids = [f"d{i}" for i in range(8)]
    result = est.estimate(store, HeldOutAgent("g", target_actions=_acts([(d, t, x) for d in ids for t, x in ((1, "i like music"), (3, "music ?"))])))
    good = result.estimates
    bad = est.estimate(store, HeldOutAgent("b", target_actions=_acts([(d, t, x) for d in ids for t, x in ((1, "i like dogs"), (3, "dogs ?"))]))).estimates
    assert good["quality"] > 0.6 and bad["quality"] < 0.4
    assert result.diagnostics["n_openings"] == 8
