"""Offline-RL critic: fitted Q evaluation (as used by Lubis et al. 2022), the paper's "DICE vs
Q-learning" ablation.

State-action vectors on the same frozen encoder as the other comparators: the mean embedding of
the ``context_turns`` turns before an agent turn, next to the embedding of the reply. A Q
network (MLP with dropout, one output per rating) is fitted on the logged transitions of the
experience data, each logged agent turn t of a dialogue:

    y_t = min over K dropout passes of Q_target(s_{t+1}, a'_{t+1})   (not the last agent turn)
    y_t = the dialogue's rating                                        (the last agent turn)

with γ = 1 and no intermediate reward (the rating arrives at the end), ``a'_{t+1}`` the
target agent's reply at the next logged state (regime a: replies at logged states; averaged
over its samples) and Q_target a slowly updated (Polyak) copy of Q. The minimum over dropout
passes is the pessimism. The agent's score is the mean Q at the opening states: its own reply
at each dialogue's first agent turn.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch

from enigma.comparators.config import ComparatorsConfig, fingerprint_of
from enigma.comparators.dialogues import logged_dialogues, rating_matrix, target_replies
from enigma.comparators.embedding import LazyEmbedder
from enigma.comparators.features import Embedder
from enigma.contracts import EstimateResult, HeldOutAgent, Regime
from enigma.ope.fqe import QNetwork, pessimistic_value, polyak  # the network and steps both fitted-Q evaluations use
from enigma.store.experience import ExperienceStore


def bellman_targets(next_value: torch.Tensor, terminal: torch.Tensor, reward: torch.Tensor) -> torch.Tensor:
    """y = reward at terminal transitions, next state's value otherwise (γ = 1, reward only at
    the end). NaN rewards (unrated) stay NaN and are masked out of the loss."""
    return torch.where(terminal[:, None], reward, next_value)


@dataclass
class Transitions:
    """Logged agent turns: index of the state-action row, of the next state's target action
    rows (averaged), terminal flag and the dialogue row (for the reward)."""

    sa: list[tuple[tuple[str, ...], str]]  # (context texts, reply) per row
    logged_rows: np.ndarray  # [N] row of each logged (s_t, a_t)
    next_rows: list[list[int]]  # per transition: rows of (s_{t+1}, a'_{t+1}) samples
    terminal: np.ndarray  # [N] bool
    dialogue: np.ndarray  # [N] dialogue index (ratings row)
    opening_rows: list[list[int]]  # per dialogue with a target reply at its first agent turn
    n_fallback: int  # next states without a target reply, valued at the logged reply


def build_transitions(experience: ExperienceStore, target: HeldOutAgent, context_turns: int) -> tuple[Transitions, int]:
    rows_t, failed, histories = target_replies(experience, target)
    by_state: dict[tuple[str, int], list[str]] = defaultdict(list)
    for r in rows_t:
        by_state[(r.dialog_id, r.turn_index)].append(r.text)
    sa: list[tuple[tuple[str, ...], str]] = []
    index: dict[tuple[tuple[str, ...], str], int] = {}

    def row(ctx: tuple[str, ...], reply: str) -> int:
        key = (ctx, reply)
        if key not in index:
            index[key] = len(sa)
            sa.append(key)
        return index[key]

    logged, nxt, term, dia, opening = [], [], [], [], []
    fallback = 0
    for k, d in enumerate(logged_dialogues(experience)):
        turns = d.turns
        agent_turns = list(d.scored)
        ctx = {i: tuple(t.text for t in turns[max(0, i - context_turns) : i]) for i in agent_turns}
        for j, i in enumerate(agent_turns):
            logged.append(row(ctx[i], turns[i].text))
            dia.append(k)
            if j + 1 < len(agent_turns):
                n = agent_turns[j + 1]
                replies = by_state.get((d.dialog_id, n))
                if not replies:
                    fallback += 1
                    replies = [turns[n].text]
                nxt.append([row(ctx[n], x) for x in replies])
                term.append(False)
            else:
                nxt.append([])
                term.append(True)
        if agent_turns and (d.dialog_id, agent_turns[0]) in by_state:
            i = agent_turns[0]
            opening.append([row(ctx[i], x) for x in by_state[(d.dialog_id, i)]])
    if not opening:
        raise ValueError(f"agent {target.agent_id}: no target reply at any dialogue's first agent turn")
    t = Transitions(sa, np.asarray(logged), nxt, np.asarray(term, dtype=bool), np.asarray(dia), opening, fallback)
    return t, failed


def sa_vectors(sa: list[tuple[tuple[str, ...], str]], embedder: Embedder) -> np.ndarray:
    texts: dict[str, int] = {}
    for ctx, reply in sa:
        for x in (*ctx, reply):
            texts.setdefault(x, len(texts))
    vecs = np.asarray(embedder.embed(list(texts)), dtype=np.float32)
    dim = vecs.shape[1]
    out = np.zeros((len(sa), 2 * dim), dtype=np.float32)
    for n, (ctx, reply) in enumerate(sa):
        if ctx:
            out[n, :dim] = vecs[[texts[x] for x in ctx]].mean(axis=0)
        out[n, dim:] = vecs[texts[reply]]
    return out


def _mean_rows(values: torch.Tensor, groups: list[list[int]]) -> torch.Tensor:
    """[G, R]: the mean of ``values`` over each group's rows (empty groups give zeros)."""
    flat = [r for g in groups for r in g]
    owner = [k for k, g in enumerate(groups) for _ in g]
    out = torch.zeros(len(groups), values.shape[1])
    if flat:
        out.index_add_(0, torch.tensor(owner), values[torch.tensor(flat)])
    counts = torch.tensor([max(len(g), 1) for g in groups], dtype=torch.float32)
    return out / counts[:, None]


class FqeCriticEstimator:
    regimes = frozenset({Regime.REPLIES_AT_LOGGED_STATES})
    name = "fqe-critic[replies-at-logged-states]"

    def __init__(self, config: ComparatorsConfig | None = None, embedder: Embedder | None = None):
        self.config = config or ComparatorsConfig()
        self.embedder = embedder if embedder is not None else LazyEmbedder(self.config)

    def fingerprint(self) -> str:
        return fingerprint_of("fqe-critic", self.config.embedding_model, self.config.critic)

    def estimate(self, experience: ExperienceStore, target: HeldOutAgent) -> EstimateResult:
        c = self.config.critic
        names = experience.rating_names
        tr, failed = build_transitions(experience, target, c.context_turns)
        x = torch.from_numpy(sa_vectors(tr.sa, self.embedder))
        ratings = torch.as_tensor(rating_matrix(experience, names), dtype=torch.float32)
        reward = ratings[torch.as_tensor(tr.dialogue)]
        terminal = torch.as_tensor(tr.terminal)
        logged = torch.as_tensor(tr.logged_rows)
        torch.manual_seed(c.seed)
        q = QNetwork(x.shape[1], c.hidden, len(names), c.dropout)
        with torch.no_grad():  # start at the mean rating: the first targets are then sensible
            q.net[-1].bias.copy_(torch.nan_to_num(torch.nanmean(ratings, dim=0), nan=0.5))
        q_target = copy.deepcopy(q)
        opt = torch.optim.Adam(q.parameters(), lr=c.lr)
        gen = torch.Generator().manual_seed(c.seed)
        n = len(tr.logged_rows)
        loss_value = float("nan")
        # only next-state rows need the slow network's value
        need = torch.tensor(sorted({r for g in tr.next_rows for r in g}), dtype=torch.long)
        for _ in range(c.epochs):
            # targets for every transition from the slow network, once per epoch
            values = torch.zeros(len(tr.sa), len(names))
            if len(need):
                values[need] = pessimistic_value(q_target, x[need], c.dropout_passes)
            y = bellman_targets(_mean_rows(values, tr.next_rows), terminal, reward)
            q.train()
            order = torch.randperm(n, generator=gen)
            for s in range(0, n, c.batch_size):
                b = order[s : s + c.batch_size]
                pred = q(x[logged[b]])
                yb = y[b]
                mask = ~torch.isnan(yb)
                loss = ((pred - torch.nan_to_num(yb)) ** 2 * mask).sum() / mask.sum().clamp(min=1)
                opt.zero_grad()
                loss.backward()
                opt.step()
                polyak(q_target, q, c.tau)
                loss_value = float(loss.detach())
        q.eval()
        with torch.no_grad():
            opening = _mean_rows(q(x), tr.opening_rows).mean(dim=0)
        diagnostics = {
            "n_transitions": n,
            "n_openings": len(tr.opening_rows),
            "n_failed_replies": failed,
            "n_next_states_at_logged_reply": tr.n_fallback,
            "final_loss": loss_value,
        }
        return EstimateResult({name: float(v) for name, v in zip(names, opening)}, diagnostics=diagnostics)
