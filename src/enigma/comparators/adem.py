"""ADEM (Lowe et al. 2017) and AutoJudge (Deriu & Cieliebak 2019): learned turn-level scorers
on context, reference and response embeddings.

Per scored agent turn: ``c`` the context vector (mean embedding of the ``context_turns`` turns
before it), ``r̂`` the response, ``r`` the reference (the logged reply at that state), all
frozen sentence embeddings reduced by PCA (fitted on the training turns). ADEM's score is

    (cᵀ M r̂ + rᵀ N r̂ − α) / β

with M, N initialised to the identity and trained by squared error against the turn's label
(its dialogue's rating, one M, N per rating) plus an L2 penalty on M and N. α and β are fixed
before training so that the initial scores have the training labels' mean and spread.

Training turns are the other agents' logged turns, whose only reference is the logged reply
itself (no second human reply exists for a logged state), so in training ``r = r̂``; at the
held-out agent's turns ``r`` is the logged reply and ``r̂`` its own (regime a). AutoJudge drops
the reference term and scores the agent's own dialogues (rollouts or self-play, regime b),
with contexts from those dialogues. The estimate is the mean score over the agent's turns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from sklearn.decomposition import PCA

from enigma.comparators.config import ComparatorsConfig, fingerprint_of
from enigma.comparators.dialogues import (
    AgentDialogue,
    logged_dialogues,
    rating_matrix,
    replies_at_logged_states,
    target_dialogues,
)
from enigma.comparators.embedding import LazyEmbedder
from enigma.comparators.features import Embedder
from enigma.contracts import EstimateResult, HeldOutAgent, Regime
from enigma.store.experience import ExperienceStore


@dataclass
class TurnTriples:
    """Per scored turn: texts of the context turns, the response, the reference, and which
    dialogue (row of the rating matrix) it came from."""

    contexts: list[tuple[str, ...]]
    responses: list[str]
    references: list[str]
    dialogue_row: np.ndarray


def turn_triples(
    dialogues: Sequence[AgentDialogue], context_turns: int, references: Sequence[AgentDialogue] | None = None
) -> TurnTriples:
    """``references``: the logged dialogues aligned with ``dialogues`` (same turn layout);
    None means the response is its own reference (the training case)."""
    ctx, resp, ref, rows = [], [], [], []
    for k, d in enumerate(dialogues):
        for i in d.scored:
            ctx.append(tuple(t.text for t in d.turns[max(0, i - context_turns) : i]))
            resp.append(d.turns[i].text)
            ref.append(references[k].turns[i].text if references is not None else d.turns[i].text)
            rows.append(k)
    return TurnTriples(ctx, resp, ref, np.asarray(rows, dtype=np.int64))


class TextVectors:
    """Embeds each distinct text once and returns (PCA-reduced) vectors for turn triples."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder

    def raw(self, t: TurnTriples) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        texts: dict[str, int] = {}
        for group in (t.responses, t.references):
            for x in group:
                texts.setdefault(x, len(texts))
        for c in t.contexts:
            for x in c:
                texts.setdefault(x, len(texts))
        vecs = np.asarray(self.embedder.embed(list(texts)), dtype=np.float64)
        dim = vecs.shape[1]
        ctx = np.stack([vecs[[texts[x] for x in c]].mean(axis=0) if c else np.zeros(dim) for c in t.contexts])
        resp = vecs[[texts[x] for x in t.responses]]
        ref = vecs[[texts[x] for x in t.references]]
        return ctx, ref, resp


class BilinearScorer(torch.nn.Module):
    """One ADEM (or, without ``N``, AutoJudge) score per rating: inputs [B, k], output [B, R]."""

    def __init__(self, k: int, n_ratings: int, use_reference: bool = True):
        super().__init__()
        eye = torch.eye(k).expand(n_ratings, k, k).clone()
        self.M = torch.nn.Parameter(eye.clone())
        self.N = torch.nn.Parameter(eye.clone()) if use_reference else None
        self.register_buffer("alpha", torch.zeros(n_ratings))
        self.register_buffer("beta", torch.ones(n_ratings))

    @staticmethod
    def _bilinear(x: torch.Tensor, W: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # (x W) then a row-wise dot with y: [R, B, k] at most, never a [B, R, k, k] intermediate
        return (torch.matmul(x, W) * y).sum(dim=-1).T

    def raw(self, c: torch.Tensor, r: torch.Tensor, rh: torch.Tensor) -> torch.Tensor:
        s = self._bilinear(c, self.M, rh)
        if self.N is not None:
            s = s + self._bilinear(r, self.N, rh)
        return s

    def forward(self, c: torch.Tensor, r: torch.Tensor, rh: torch.Tensor) -> torch.Tensor:
        return (self.raw(c, r, rh) - self.alpha) / self.beta

    def l2(self) -> torch.Tensor:
        out = (self.M**2).sum()
        if self.N is not None:
            out = out + (self.N**2).sum()
        return out


def adem_loss(model: BilinearScorer, c, r, rh, y: torch.Tensor, l2: float) -> torch.Tensor:
    """Mean squared error over the rated entries (NaN = unrated) plus ``l2`` × ‖M‖² (+ ‖N‖²)."""
    pred = model(c, r, rh)
    mask = ~torch.isnan(y)
    diff = torch.where(mask, pred - torch.nan_to_num(y), torch.zeros_like(pred))
    return (diff**2).sum() / mask.sum().clamp(min=1) + l2 * model.l2()


def calibrate(model: BilinearScorer, c, r, rh, y: np.ndarray) -> None:
    """Fix α, β so that the initial scores have the labels' per-rating mean and spread."""
    with torch.no_grad():
        s = model.raw(c, r, rh).numpy()
    s_mu, s_sd = s.mean(axis=0), s.std(axis=0)
    y_mu, y_sd = np.nanmean(y, axis=0), np.nanstd(y, axis=0)
    beta = np.where((s_sd > 0) & (y_sd > 0), s_sd / np.where(y_sd > 0, y_sd, 1), 1.0)
    model.beta.copy_(torch.as_tensor(beta, dtype=torch.float32))
    model.alpha.copy_(torch.as_tensor(s_mu - y_mu * beta, dtype=torch.float32))


class _BilinearEstimator:
    use_reference = True
    kind = ""
    regimes: frozenset[Regime]

    def __init__(self, regime: Regime, config: ComparatorsConfig | None = None, embedder: Embedder | None = None):
        self.regime = regime
        self.regimes = frozenset({regime})
        self.config = config or ComparatorsConfig()
        self.embedder = embedder if embedder is not None else LazyEmbedder(self.config)
        self.name = f"{self.kind}[{regime.value}]"

    def fingerprint(self) -> str:
        return fingerprint_of(self.kind, self.regime.value, self.config.embedding_model, self.config.adem)

    def _targets(self, experience: ExperienceStore, target: HeldOutAgent) -> TurnTriples:
        c = self.config.adem
        if self.use_reference:
            got = replies_at_logged_states(experience, target)
            logged = {d.dialog_id: d for d in logged_dialogues(experience)}
            refs = [logged[d.dialog_id.rsplit("#", 1)[0]] for d in got.dialogues]
            return turn_triples(got.dialogues, c.context_turns, refs)
        return turn_triples(target_dialogues(experience, target, self.regime).dialogues, c.context_turns)

    def estimate(self, experience: ExperienceStore, target: HeldOutAgent) -> EstimateResult:
        c = self.config.adem
        names = experience.rating_names
        train = logged_dialogues(experience)
        tr = turn_triples(train, c.context_turns)
        y = rating_matrix(experience, names)[tr.dialogue_row]  # per-turn labels: the dialogue's rating
        vec = TextVectors(self.embedder)
        raw = vec.raw(tr)
        k = min(c.pca_dim, raw[0].shape[1], len(tr.responses))
        pca = PCA(n_components=k, random_state=c.seed).fit(np.vstack(raw))
        as_t = lambda a: torch.as_tensor(pca.transform(a), dtype=torch.float32)  # noqa: E731
        ct, rt, rht = (as_t(a) for a in raw)
        torch.manual_seed(c.seed)
        model = BilinearScorer(k, len(names), self.use_reference)
        calibrate(model, ct, rt, rht, y)
        yt = torch.as_tensor(y, dtype=torch.float32)
        opt = torch.optim.Adam(model.parameters(), lr=c.lr)
        for _ in range(c.epochs):
            opt.zero_grad()
            loss = adem_loss(model, ct, rt, rht, yt, c.l2)
            loss.backward()
            opt.step()
        te = self._targets(experience, target)
        with torch.no_grad():
            pred = model(*(as_t(a) for a in vec.raw(te))).numpy()
        diagnostics = {"n_train_turns": len(tr.responses), "n_target_turns": len(te.responses), "train_loss": float(loss.detach()), "pca_dim": k}
        return EstimateResult({n: float(v) for n, v in zip(names, pred.mean(axis=0))}, diagnostics=diagnostics)


class AdemEstimator(_BilinearEstimator):
    kind = "adem"
    use_reference = True

    def __init__(self, config: ComparatorsConfig | None = None, embedder: Embedder | None = None):
        super().__init__(Regime.REPLIES_AT_LOGGED_STATES, config, embedder)


class AutoJudgeEstimator(_BilinearEstimator):
    kind = "autojudge"
    use_reference = False

    def __init__(self, regime: Regime = Regime.OWN_ROLLOUTS, config: ComparatorsConfig | None = None, embedder: Embedder | None = None):
        super().__init__(regime, config, embedder)
