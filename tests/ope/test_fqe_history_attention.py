"""The attention-pooled summary of a turn's past for the fitted Q (``fqe.history_attention``):
what it may read, that folding the key into the query leaves the scores' softmax as it was,
and that a Q with it reads a deciding turn that the history's mean, max and min cannot."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from enigma.encoders.base import turn_positions
from enigma.ope.config import FqeConfig
from enigma.ope.fqe import HistoryAttention, QNetwork, _padded, fit_turn_q, pessimistic_value
from enigma.ope.turns import TurnFeatures


def _summaries(attention: HistoryAttention, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    dialogue, turn = turn_positions(n)
    with torch.no_grad():
        return attention(x, _padded(x, dialogue, turn)[dialogue], turn)


def test_the_summary_is_a_weighted_mean_of_the_dialogues_earlier_turns_only():
    torch.manual_seed(0)
    attention = HistoryAttention(3, dim=4)
    n = torch.tensor([4, 1, 3])
    x = torch.randn(8, 3, generator=torch.Generator().manual_seed(1))
    s = _summaries(attention, x, n)
    assert torch.equal(s[[0, 4, 5]], torch.zeros(3, 3))  # a first turn has no past
    torch.testing.assert_close(s[1], x[0])  # one earlier turn: all the weight is on it
    torch.testing.assert_close(s[6], x[5])  # nothing of the dialogue before it leaks in
    changed = x.clone()
    changed[3] += 100.0  # the last turn of the first dialogue: after every other of its turns
    changed[7] += 100.0
    torch.testing.assert_close(_summaries(attention, changed, n)[[0, 1, 2, 4, 5, 6]], s[[0, 1, 2, 4, 5, 6]])
    # a convex combination: inside the earlier turns' range, column by column
    assert torch.all(s[3] <= x[:3].max(0).values + 1e-6) and torch.all(s[3] >= x[:3].min(0).values - 1e-6)


def test_the_folded_key_gives_the_weights_of_the_scaled_dot_product_with_a_key_bias():
    """(W^T q) . e drops q . b from q . (W e + b): the same at every earlier turn, so softmax
    gives the same weights whatever the key's bias."""
    torch.manual_seed(0)
    attention = HistoryAttention(5, dim=4)
    pair, earlier = torch.randn(6, 5), torch.randn(6, 7, 5)
    turn = torch.tensor([7, 7, 3, 1, 5, 2])
    bias = torch.randn(4)
    with torch.no_grad():
        scores = torch.einsum("bk,blk->bl", attention.query(pair), earlier @ attention.key.weight.T + bias) * attention.scale
        valid = torch.arange(7) < turn.unsqueeze(1)
        weights = torch.softmax(scores.masked_fill(~valid, -1e9), 1)
        torch.testing.assert_close(attention(pair, earlier, turn), torch.einsum("bl,bld->bd", weights, earlier))


def test_the_attention_needs_the_history():
    assert FqeConfig(history=True, history_attention=True).history_attention
    with pytest.raises(ValidationError, match="fqe.history: true"):
        FqeConfig(history=False, history_attention=True)


def test_a_q_with_the_attention_reads_the_deciding_turn_that_the_mean_max_and_min_cannot():
    """The first turn's first feature decides the rating (+1: rated 1, -1: rated 0); the second
    turn carries the opposite value there, so at every later turn the earlier turns' mean, max and
    min of that feature are the same for both kinds of dialogue. Only the first turn carries a
    marker (the second feature). Five closing turns follow. At the last turn today's history
    leaves the two kinds alike; the attention can put its weight on the marked turn and tell them
    apart."""
    gen = torch.Generator().manual_seed(0)
    n_dialogues, length = 80, 7
    n_turns = torch.full((n_dialogues,), length)
    good = torch.arange(n_dialogues) % 2 == 0
    logged = torch.zeros((n_dialogues, length, 3))
    sign = torch.where(good, 1.0, -1.0)
    logged[:, 0, 0], logged[:, 1, 0] = sign, -sign
    logged[:, 0, 1] = 1.0
    logged[:, 2:, 2] = 1.0 + 0.01 * torch.randn((n_dialogues, length - 2), generator=gen)
    logged = logged.reshape(-1, 3)
    turns = TurnFeatures(logged, logged.unsqueeze(1).clone(), torch.ones((len(logged), 1), dtype=torch.bool), n_turns)
    rewards = good.double().unsqueeze(1).numpy()
    today = FqeConfig(dropout=0.0, epochs=60, tau=0.1, hidden=16, history=True, history_extremes=True)
    last = torch.arange(n_dialogues) * length + length - 1
    plain = fit_turn_q(turns, rewards, today, seed=0).logged[last, 0]
    assert float(plain[good].mean() - plain[~good].mean()) < 0.1
    attn = fit_turn_q(turns, rewards, today.model_copy(update={"history_attention": True}), seed=0)
    q_last = attn.logged[last, 0]
    assert float(q_last[good].min()) > 0.8 and float(q_last[~good].max()) < 0.2
    assert np.isfinite(attn.target.numpy()).all()


def test_a_plain_q_takes_the_rows_the_attentive_one_reads_and_ignores_them():
    # the fitting loop calls every network as q(x, rows): a plain Q must answer as q(x)
    torch.manual_seed(0)
    q = QNetwork(5, 8, 2, dropout=0.0, linear=True).eval()
    x, rows = torch.randn(7, 5), torch.arange(7)
    with torch.no_grad():
        torch.testing.assert_close(q(x, rows), q(x), rtol=0, atol=0)
    torch.testing.assert_close(pessimistic_value(q, x, 3, rows), pessimistic_value(q, x, 3), rtol=0, atol=0)
