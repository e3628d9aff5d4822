"""DynaEval (Zhang et al. 2021), label-free dialogue-level scoring.

A dialogue is its utterance embeddings (frozen MiniLM, cached). A BiLSTM reads them in order;
one relational graph convolution mixes each utterance with those within ``window`` turns, with
one weight per relation type: (same / other speaker) × (earlier / later utterance), plus a
self loop; mean and max pooling over utterances and a small MLP give one score. Training
ranks every real dialogue of the experience data above two corrupted copies of it by a margin:

- utterance replacement: a share of its utterances swapped for utterances of other dialogues;
- speaker shuffle: one speaker's utterances put in a different order, the other's kept.

Ratings are never used. The agent's score is the mean over its dialogues (own rollouts, or
the logged dialogues with its replies at logged states), returned as is for every rating
(like the other rating-free metrics: a higher score is taken to be better).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from enigma.comparators.config import ComparatorsConfig, fingerprint_of
from enigma.comparators.dialogues import AgentDialogue, logged_dialogues, target_dialogues
from enigma.comparators.embedding import LazyEmbedder
from enigma.comparators.features import Embedder
from enigma.contracts import EstimateResult, HeldOutAgent, Regime
from enigma.store.experience import ExperienceStore

N_RELATIONS = 4  # same speaker earlier, same later, other earlier, other later


# ---- negative samplers (on sequences of utterance ids) -------------------------------------
def utterance_replacement(ids: Sequence[int], pool: np.ndarray, rng: np.random.Generator, share: float) -> list[int]:
    """A copy of ``ids`` with max(1, share × length) positions replaced by utterances drawn
    from ``pool`` (utterance ids of other dialogues) that differ from the one replaced."""
    out = list(ids)
    if not out or len(pool) == 0:
        return out
    k = max(1, int(round(share * len(out))))
    for pos in rng.choice(len(out), size=min(k, len(out)), replace=False):
        for _ in range(8):  # draw again if we picked the very same utterance
            new = int(pool[rng.integers(len(pool))])
            if new != out[pos]:
                out[pos] = new
                break
    return out


def speaker_shuffle(ids: Sequence[int], roles: Sequence[int], rng: np.random.Generator, speaker: int | None = None) -> list[int] | None:
    """A copy of ``ids`` with one speaker's utterances in a different order (the other
    speaker's stay in place); None when no reordering can change the dialogue."""
    speakers = [s for s in (speaker,) if s is not None] or list(rng.permutation(sorted(set(roles))))
    for s in speakers:
        pos = [i for i, r in enumerate(roles) if r == s]
        vals = [ids[i] for i in pos]
        if len(set(vals)) < 2:
            continue
        for _ in range(16):
            perm = list(rng.permutation(len(vals)))
            if [vals[p] for p in perm] != vals:
                out = list(ids)
                for i, p in zip(pos, perm):
                    out[i] = vals[p]
                return out
    return None


# ---- the model -----------------------------------------------------------------------------
def relation_adjacency(roles: torch.Tensor, mask: torch.Tensor, window: int) -> torch.Tensor:
    """[B, R, T, T] row-normalised adjacency: entry (i, j) of relation r is set when utterance
    j is within ``window`` of i (j != i), both are real, and (speaker, direction) is r."""
    B, T = roles.shape
    idx = torch.arange(T)
    dist = idx[None, :] - idx[:, None]  # j - i
    near = (dist.abs() <= window) & (dist != 0)
    real = mask[:, :, None] & mask[:, None, :]
    same = roles[:, :, None] == roles[:, None, :]
    later = (dist > 0)[None]
    rels = [same & ~later, same & later, ~same & ~later, ~same & later]
    adj = torch.stack([(r & near[None] & real) for r in rels], dim=1).float()
    return adj / adj.sum(dim=-1, keepdim=True).clamp(min=1.0)


class DynaEvalModel(torch.nn.Module):
    def __init__(self, d_in: int, hidden: int = 64, window: int = 2):
        super().__init__()
        self.window = window
        self.lstm = torch.nn.LSTM(d_in, hidden, batch_first=True, bidirectional=True)
        h2 = 2 * hidden
        self.self_loop = torch.nn.Linear(h2, h2)
        self.rel = torch.nn.Parameter(torch.randn(N_RELATIONS, h2, h2) / h2**0.5)
        self.head = torch.nn.Sequential(torch.nn.Linear(2 * h2, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor, roles: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x [B, T, d], roles [B, T] (0 user, 1 agent), mask [B, T] -> scores [B]."""
        lengths = mask.sum(dim=1).clamp(min=1).cpu()
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = torch.nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=x.shape[1])
        adj = relation_adjacency(roles, mask, self.window)
        msg = torch.einsum("brij,bjd,rde->bie", adj, h, self.rel)
        g = torch.relu(self.self_loop(h) + msg)
        m = mask[:, :, None].float()
        mean = (g * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)
        mx = g.masked_fill(~mask[:, :, None], float("-inf")).max(dim=1).values
        return self.head(torch.cat([mean, mx], dim=-1)).squeeze(-1)


def margin_ranking_loss(pos: torch.Tensor, neg: torch.Tensor, margin: float) -> torch.Tensor:
    return torch.relu(margin - pos + neg).mean()


# ---- data ----------------------------------------------------------------------------------
class UtteranceTable:
    """Distinct texts -> rows of one embedding matrix; dialogues as id sequences + roles."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        self.index: dict[str, int] = {}
        self.vectors = np.zeros((0, 0), dtype=np.float32)

    def add(self, dialogues: Sequence[AgentDialogue]) -> list[tuple[list[int], list[int]]]:
        new = [t.text for d in dialogues for t in d.turns if t.text not in self.index]
        new = list(dict.fromkeys(new))
        if new:
            vecs = np.asarray(self.embedder.embed(new), dtype=np.float32)
            self.vectors = vecs if self.vectors.size == 0 else np.vstack([self.vectors, vecs])
            for x in new:
                self.index[x] = len(self.index)
        return [([self.index[t.text] for t in d.turns], [1 if t.role == "agent" else 0 for t in d.turns]) for d in dialogues]

    def batch(self, seqs: Sequence[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        T = max(len(ids) for ids, _ in seqs)
        d = self.vectors.shape[1]
        x = np.zeros((len(seqs), T, d), dtype=np.float32)
        roles = np.zeros((len(seqs), T), dtype=np.int64)
        mask = np.zeros((len(seqs), T), dtype=bool)
        for b, (ids, rs) in enumerate(seqs):
            x[b, : len(ids)] = self.vectors[ids]
            roles[b, : len(rs)] = rs
            mask[b, : len(ids)] = True
        return torch.from_numpy(x), torch.from_numpy(roles), torch.from_numpy(mask)


class DynaEvalEstimator:
    regimes: frozenset[Regime]

    def __init__(self, regime: Regime = Regime.OWN_ROLLOUTS, config: ComparatorsConfig | None = None, embedder: Embedder | None = None, progress: bool = False):
        self.regime = regime
        self.regimes = frozenset({regime})
        self.config = config or ComparatorsConfig()
        self.embedder = embedder if embedder is not None else LazyEmbedder(self.config)
        self.progress = progress
        self.name = f"dynaeval[{regime.value}]"

    def fingerprint(self) -> str:
        return fingerprint_of("dynaeval", self.regime.value, self.config.embedding_model, self.config.dynaeval)

    def train(self, table: UtteranceTable, seqs: list[tuple[list[int], list[int]]]) -> tuple[DynaEvalModel, list[float]]:
        c = self.config.dynaeval
        rng = np.random.default_rng(c.seed)
        torch.manual_seed(c.seed)
        model = DynaEvalModel(table.vectors.shape[1], c.hidden, c.window)
        opt = torch.optim.Adam(model.parameters(), lr=c.lr)
        owner = np.concatenate([[k] * len(ids) for k, (ids, _) in enumerate(seqs)])
        flat = np.concatenate([ids for ids, _ in seqs])
        losses = []
        for _ in tqdm(range(c.epochs), desc="dynaeval", disable=not self.progress, leave=False):
            order = rng.permutation(len(seqs))
            total, n = 0.0, 0
            for s in range(0, len(order), c.batch_size):
                pos, neg = [], []
                for k in order[s : s + c.batch_size]:
                    ids, roles = seqs[k]
                    pool = flat[owner != k] if len(seqs) > 1 else flat
                    neg_ur = utterance_replacement(ids, pool, rng, c.replace_share)
                    neg_ss = speaker_shuffle(ids, roles, rng)
                    for negative in (neg_ur, neg_ss):
                        if negative is not None and negative != list(ids):
                            pos.append((ids, roles))
                            neg.append((negative, roles))
                if not pos:
                    continue
                opt.zero_grad()
                loss = margin_ranking_loss(model(*table.batch(pos)), model(*table.batch(neg)), c.margin)
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(pos)
                n += len(pos)
            losses.append(total / max(n, 1))
        return model, losses

    def estimate(self, experience: ExperienceStore, target: HeldOutAgent) -> EstimateResult:
        table = UtteranceTable(self.embedder)
        train = table.add([d for d in logged_dialogues(experience) if d.turns])
        model, losses = self.train(table, train)
        got = target_dialogues(experience, target, self.regime)
        seqs = table.add(got.dialogues)
        model.eval()
        scores = []
        with torch.no_grad():
            for s in range(0, len(seqs), 256):
                scores.append(model(*table.batch(seqs[s : s + 256])).numpy())
        value = float(np.concatenate(scores).mean())
        diagnostics = {"n_train_dialogues": len(train), "n_dialogues": len(seqs), "final_loss": losses[-1] if losses else None, "score": value}
        return EstimateResult({n: value for n in experience.rating_names}, diagnostics=diagnostics)
