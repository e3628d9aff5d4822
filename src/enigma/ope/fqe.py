"""Fitted Q evaluation on ENIGMA's own turn features: a nonlinear Q for the doubly robust value
(``dice.q_model: fqe``; ``enigma.ope.value``).

The linear Q of ``value.fit_q`` lives in nu's basis, so it is no richer than zeta. Here a small
MLP is fitted to the episodic Bellman equation on the logged transitions, on the same rows the
solver reads (``TurnFeatures``: the logged pair at every real agent turn, the target's samples at
the same states):

    Q(s_k, a_k) <- mean over the target's samples a' of Q_slow(s_{k+1}, a')   (not the last turn)
    Q(s_k, a_k) <- the dialogue's rating                                   (the last turn)

with one output per rating, unrated dialogues masked out of the loss and ``Q_slow`` a Polyak copy.
``fqe.linear_members`` of an ensemble's members add a linear map of the inputs to their output.
It is the recipe of the fqe-critic comparator (Lubis et al. 2022), on the features zeta and nu
read; its pessimism (targets the minimum over dropout passes of ``Q_slow``) is
``fqe.pessimism_passes``. What the value needs of it is
``TurnQ``: Q at the logged action and the mean Q of the target's samples, at every real turn.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch

from enigma.encoders.base import rows_of, turn_positions
from enigma.ope.config import FqeConfig
from enigma.ope.turns import TurnFeatures


@dataclass
class TurnQ:
    """``logged`` [T, K]: Q(s_t, a_t) per rating at every real agent turn; ``target`` [T, K]: the
    mean of Q(s_t, a') over the target's samples at the same state (rows as in ``TurnFeatures``)."""

    logged: torch.Tensor
    target: torch.Tensor
    n_agent_turns: torch.Tensor

    def select(self, index: torch.Tensor) -> "TurnQ":
        """The dialogues at ``index`` (repeats allowed), in that order, as ``TurnFeatures.select``."""
        r = rows_of(self.n_agent_turns.cpu(), index).to(self.logged.device)
        return TurnQ(self.logged[r], self.target[r], self.n_agent_turns[index.to(self.n_agent_turns.device)])


class QNetwork(torch.nn.Module):
    def __init__(self, d_in: int, hidden: int, n_ratings: int, dropout: float, linear: bool = False):
        super().__init__()
        # starts at zero, so the fit starts where the network alone does
        self.linear = torch.nn.Linear(d_in, n_ratings, bias=False) if linear else None
        if self.linear is not None:
            torch.nn.init.zeros_(self.linear.weight)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(d_in, hidden),
            torch.nn.ReLU(),
            torch.nn.Dropout(dropout),
            torch.nn.Linear(hidden, hidden),
            torch.nn.ReLU(),
            torch.nn.Dropout(dropout),
            torch.nn.Linear(hidden, n_ratings),
        )

    def forward(self, x: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        # ``rows`` (which logged row each input belongs to) is read only by ``AttentiveQNetwork``;
        # taking it here lets the fitting loop call every network the same way
        out = self.net(x)
        return out if self.linear is None else out + self.linear(x)


class HistoryAttention(torch.nn.Module):
    """An attention-pooled summary of a dialogue's earlier turns (``fqe.history_attention``): the
    softmax-weighted mean of the earlier logged pairs' features ``earlier`` [G, L, d] (dialogue,
    turn), scored by the scaled dot product of a query map of the current pair and a key map of
    each earlier pair. The weights are learned from the Bellman targets, so they can rest on the
    turn that decided the rating however many turns came after it (the mean dilutes it)."""

    def __init__(self, d: int, dim: int = 16):
        super().__init__()
        self.query = torch.nn.Linear(d, dim)
        # no bias: q . (W e + b) = (W^T q) . e + q . b, whose second term is the same at every
        # earlier turn, so softmax drops it
        self.key = torch.nn.Linear(d, dim, bias=False)
        self.scale = dim ** -0.5

    def forward(self, pair: torch.Tensor, earlier: torch.Tensor, turn: torch.Tensor) -> torch.Tensor:
        """[B, d] for the pairs ``pair`` [B, d] at turn ``turn`` [B] with their dialogues' rows
        ``earlier`` [B, L, d]; zeros at a first turn."""
        # the key map folded into the query ((W^T q) . e, not q . (W e)): one product over the B x L
        # earlier rows of d numbers each, not a d x dim map of every one of them and its gradient.
        # Products and sums, not bmm: B matrix-vector products of L x d run five times slower so
        folded = (self.query(pair) @ self.key.weight) * self.scale
        scores = (earlier * folded.unsqueeze(1)).sum(2)
        valid = torch.arange(earlier.shape[1]) < turn.unsqueeze(1)
        # a large negative, not -inf: a first turn has no valid score, and softmax over all -inf is NaN
        weights = torch.softmax(scores.masked_fill(~valid, -1e9), 1) * valid.any(1, keepdim=True)
        return (weights.unsqueeze(2) * earlier).sum(1)


class AttentiveQNetwork(QNetwork):
    """``QNetwork`` whose input also gets ``HistoryAttention``'s summary, computed from the input's
    first ``d_pair`` columns (the pair's standardised features) and the earlier turns of the
    logged row each input belongs to (``rows``; ``set_history`` gives the dialogues' padded rows)."""

    def __init__(self, d_in: int, d_pair: int, hidden: int, n_ratings: int, dropout: float, linear: bool = False):
        super().__init__(d_in, hidden, n_ratings, dropout, linear)
        self.d_pair = d_pair
        self.attention = HistoryAttention(d_pair)
        # the summary's own slice of the first layer (and of the skip path), added to the input's:
        # the same map as one layer over [input, summary], but the backward pass computes no
        # gradient for the input, which needs none (one layer over both would, the summary needing one)
        self.summary_in = torch.nn.Linear(d_pair, hidden, bias=False)
        bound = (d_in + d_pair) ** -0.5  # the init of one layer over both
        torch.nn.init.uniform_(self.summary_in.weight, -bound, bound)
        with torch.no_grad():
            self.net[0].weight.uniform_(-bound, bound)
            self.net[0].bias.uniform_(-bound, bound)
        self.summary_skip = torch.nn.Linear(d_pair, n_ratings, bias=False) if linear else None
        if self.summary_skip is not None:
            torch.nn.init.zeros_(self.summary_skip.weight)
        self.padded = self.row_dialogue = self.row_turn = None

    def set_history(self, padded: torch.Tensor, row_dialogue: torch.Tensor, row_turn: torch.Tensor) -> None:
        self.padded, self.row_dialogue, self.row_turn = padded, row_dialogue, row_turn

    def forward(self, x: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        # in chunks: every target sample at once would gather [T x samples, L, d] of earlier turns
        parts = [self._forward(x[s : s + _CHUNK], rows[s : s + _CHUNK]) for s in range(0, len(x), _CHUNK)]
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def _forward(self, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        # index_select, not indexing: the same rows, five times faster on the CPU
        earlier = self.padded.index_select(0, self.row_dialogue.index_select(0, rows))
        summary = self.attention(x[:, : self.d_pair], earlier, self.row_turn.index_select(0, rows))
        out = self.net[1:](self.net[0](x) + self.summary_in(summary))
        return out if self.linear is None else out + self.linear(x) + self.summary_skip(summary)


_CHUNK = 4096


def pessimistic_value(q_target: QNetwork, x: torch.Tensor, passes: int, rows: torch.Tensor | None = None) -> torch.Tensor:
    """min over ``passes`` stochastic (dropout-on) passes: [N, R] (``rows``: ``AttentiveQNetwork``'s)."""
    q_target.train()  # dropout on: each pass is one draw
    with torch.no_grad():
        return torch.stack([q_target(x, rows) for _ in range(passes)]).min(dim=0).values


def polyak(target: torch.nn.Module, online: torch.nn.Module, tau: float) -> None:
    with torch.no_grad():
        for pt, po in zip(target.parameters(), online.parameters()):
            pt.mul_(1 - tau).add_(po, alpha=tau)


def _polyak_all(target: list[torch.Tensor], online: list[torch.Tensor], tau: float) -> None:
    """``polyak`` on the two networks' parameter lists, taken once before the loop: every
    tensor's ``mul_`` then ``add_`` as there (on the CPU ``torch._foreach_*`` runs exactly those per
    tensor, so the same bits), without walking the modules' parameters at every step."""
    with torch.no_grad():
        torch._foreach_mul_(target, 1 - tau)
        torch._foreach_add_(target, online, alpha=tau)


def fit_turn_q(turns: TurnFeatures, rewards: np.ndarray, cfg: FqeConfig, seed: int, columns: slice | None = None) -> TurnQ:
    """Fit Q by fitted Q evaluation on ``turns`` (only its feature ``columns`` when given) with the
    dialogues' ``rewards`` [N, K] (NaN: unrated) and return it at every real turn's logged pair and
    target samples: with ``cfg.ensemble`` > 1, the mean of that many fits from seeds ``seed``,
    ``seed + 1``, ... (SGD from another start lands on another Q; the mean keeps less of that), the
    last ``cfg.linear_members`` of them with the linear skip path (``QNetwork``)."""
    plain = cfg.ensemble - cfg.linear_members
    fits = [_fit_one(turns, rewards, cfg, seed + m, columns, linear=m >= plain) for m in range(cfg.ensemble)]
    if len(fits) == 1:
        return fits[0]
    return TurnQ(torch.stack([f.logged for f in fits]).mean(0), torch.stack([f.target for f in fits]).mean(0),
                 turns.n_agent_turns)


def _fit_one(turns: TurnFeatures, rewards: np.ndarray, cfg: FqeConfig, seed: int, columns: slice | None, linear: bool = False) -> TurnQ:
    """One fitted Q evaluation from ``seed``.

    Why leave the agreement block out (``fqe.agreement: false``): it describes a logged reply
    relative to the target's, and at the target's own replies it is 1 by construction, a point
    the logs visit only where a logged reply was the target's very text (often with templated
    sellers, hardly ever with free-text bots): the network would be read where it was not fitted."""
    cols = columns if columns is not None else slice(None)
    logged = turns.logged[:, cols].float().cpu()
    target = turns.target[..., cols].float().cpu()
    mask = turns.sample_mask.cpu().float()
    n_turns = turns.n_agent_turns.cpu().long()
    t_all, k = len(logged), rewards.shape[1]
    dialogue, turn = turn_positions(n_turns)
    if cfg.position:  # the same index for the logged pair and the target's samples: they share the state
        logged = torch.cat([logged, turn.float().unsqueeze(1)], 1)
        target = torch.cat([target, turn.float().view(-1, 1, 1).expand(-1, target.shape[1], 1)], 2)
    # the whitened PCA block and the agreement block have different scales. A column the logs
    # never vary on (a one-hot pair no logged dialogue took) is left unscaled: dividing by its
    # ~0 spread put the target's off-support samples a million units out, and bootstrapping from
    # there diverged (the tabular problem, logs seed 1007: the target's Q in the thousands, the estimate -40)
    mean, std = logged.mean(0), logged.std(0)
    std = torch.where(std > 1e-6, std, torch.ones_like(std))
    x_logged, x_target = (logged - mean) / std, (target - mean) / std
    d_pair = logged.shape[1]
    if cfg.history:
        h = _earlier_mean(x_logged, turn)
        x_logged = torch.cat([x_logged, h], 1)
        x_target = torch.cat([x_target, h.unsqueeze(1).expand(-1, x_target.shape[1], -1)], 2)
        if cfg.history_extremes:
            e = _earlier_extremes(x_logged[:, :d_pair], turn)
            x_logged = torch.cat([x_logged, e], 1)
            x_target = torch.cat([x_target, e.unsqueeze(1).expand(-1, x_target.shape[1], -1)], 2)
    terminal = turn + 1 == n_turns[dialogue]
    ratings = torch.as_tensor(rewards, dtype=torch.float32)  # [N, K], NaN: unrated
    # the loss sums the ratings' squared errors, so the shared hidden layer serves the ratings of
    # large spread; in units of each rating's spread every rating counts alike. With no
    # discounting the Bellman targets are affine in the ratings, so the Q maps back exactly
    centre, scale = _rating_units(ratings) if cfg.standardise else (torch.zeros(k), torch.ones(k))
    ratings = (ratings - centre) / scale
    r = ratings[dialogue]  # [T, K], used at terminal rows
    # Q is an expected rating, so it lies in the ratings' range whatever the policy: targets and
    # outputs are held there, so the network's guess at a pair the logs never took cannot feed
    # itself through the bootstrapped targets
    low, high = q_range(ratings)
    nxt = torch.clamp(torch.arange(t_all) + 1, max=t_all - 1)
    counts = mask.sum(1).clamp(min=1)

    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    attend = cfg.history and cfg.history_attention
    if attend:
        q = AttentiveQNetwork(x_logged.shape[1], d_pair, cfg.hidden, k, cfg.dropout, linear)
        q.set_history(_padded(x_logged[:, :d_pair], dialogue, turn), dialogue, turn)
    else:
        q = QNetwork(x_logged.shape[1], cfg.hidden, k, cfg.dropout, linear)
    every_row = torch.arange(t_all)
    with torch.no_grad():  # start at the mean rating: the first bootstrapped targets are then sensible
        q.net[-1].bias.copy_(torch.nan_to_num(torch.nanmean(ratings, 0), nan=0.5))
    slow = copy.deepcopy(q)
    opt = torch.optim.Adam(q.parameters(), lr=cfg.lr)
    slow_params, q_params = list(slow.parameters()), list(q.parameters())

    def target_mean(net: torch.nn.Module, passes: int = 0) -> torch.Tensor:
        """[T, K] the mean of Q over the target's samples at every state (``passes`` > 0: each
        sample's Q the minimum over that many dropout passes)."""
        flat = x_target.reshape(-1, x_target.shape[-1])
        rows = every_row.repeat_interleave(x_target.shape[1]) if attend else None
        if passes:
            per = pessimistic_value(net, flat, passes, rows)
        else:
            net.eval()
            with torch.no_grad():
                per = net(flat, rows)
        per = per.reshape(t_all, -1, k).clamp(low, high)
        return (per * mask.unsqueeze(-1)).sum(1) / counts.unsqueeze(-1)

    for _ in range(cfg.epochs):
        y = torch.where(terminal.unsqueeze(1), r, target_mean(slow, cfg.pessimism_passes)[nxt])
        seen = ~torch.isnan(y)
        y = torch.nan_to_num(y)
        q.train()
        order = torch.randperm(t_all, generator=gen)
        for s in range(0, t_all, cfg.batch_size):
            b = order[s : s + cfg.batch_size]
            # index_select, not indexing: the same rows (the same bits), several times faster on the CPU
            xb, yb, seen_b = x_logged.index_select(0, b), y.index_select(0, b), seen.index_select(0, b)
            out = q(xb, b)
            loss = (((out - yb) ** 2) * seen_b).sum() / seen_b.sum().clamp(min=1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            _polyak_all(slow_params, q_params, cfg.tau)
    q.eval()
    with torch.no_grad():
        q_logged = q(x_logged, every_row).clamp(low, high) * scale + centre
    q_target = target_mean(q) * scale + centre
    device = turns.logged.device
    return TurnQ(q_logged.double().to(device), q_target.double().to(device), turns.n_agent_turns)


def _earlier_mean(x: torch.Tensor, turn: torch.Tensor) -> torch.Tensor:
    """[T, d] at each row the mean of ``x`` over its dialogue's earlier rows (zeros at a first turn)."""
    cs = torch.cumsum(x.double(), 0)
    before = torch.cat([cs.new_zeros(1, x.shape[1]), cs[:-1]], 0)  # sum of every row above
    start = before[torch.arange(len(x)) - turn]  # sum of the rows above the dialogue's first
    return ((before - start) / turn.clamp(min=1).unsqueeze(1).double()).to(x.dtype)


def _padded(x: torch.Tensor, dialogue: torch.Tensor, turn: torch.Tensor) -> torch.Tensor:
    """[G, L, d] the rows ``x`` [T, d] by (dialogue, turn), zeros past a dialogue's last turn."""
    out = x.new_zeros(int(dialogue.max()) + 1, int(turn.max()) + 1, x.shape[1])
    out[dialogue, turn] = x
    return out


def _earlier_extremes(x: torch.Tensor, turn: torch.Tensor) -> torch.Tensor:
    """[T, 2d] at each row the element-wise max, then min, of ``x`` over its dialogue's earlier
    rows (zeros at a first turn); a dialogue's rows are consecutive, in turn order."""
    start = torch.arange(len(x)) - turn
    dialogue = torch.unique_consecutive(start, return_inverse=True)[1]
    prev = (turn - 1).clamp(min=0)
    first = (turn == 0).unsqueeze(1)
    out = []
    for sign in (1.0, -1.0):
        padded = x.new_full((int(dialogue.max()) + 1, int(turn.max()) + 1, x.shape[1]), float("-inf"))
        padded[dialogue, turn] = sign * x
        running = torch.cummax(padded, dim=1).values[dialogue, prev] * sign
        out.append(torch.where(first, torch.zeros_like(running), running))
    return torch.cat(out, 1)


def _rating_units(ratings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[K] each rating's mean and standard deviation over ``ratings`` [N, K] (NaN: unrated); 0 and
    1 for a rating nobody gave, sd 1 where every rating is the same."""
    centre = torch.nan_to_num(torch.nanmean(ratings, 0))
    sd = torch.nan_to_num(torch.nanmean((ratings - centre) ** 2, 0).sqrt())
    return centre, torch.where(sd > 1e-8, sd, torch.ones_like(sd))


def q_range(ratings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[K] each rating's lowest and highest observed value in ``ratings`` [N, K] (NaN: unrated;
    0 and 1 for a rating nobody gave)."""
    low = torch.nan_to_num(ratings, nan=float("inf")).amin(0)
    high = torch.nan_to_num(ratings, nan=float("-inf")).amax(0)
    none = torch.isinf(low)
    return torch.where(none, torch.zeros_like(low), low), torch.where(none, torch.ones_like(high), high)
