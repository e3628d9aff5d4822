"""Self-play evaluation (SPE): a reward model trained on the other agents' rated dialogues
scores the held-out agent's self-play or simulator dialogues (regime OWN_ROLLOUTS).

Inputs per dialogue: the mean frozen sentence embedding of the scored agent replies, plus the
dialogue-level features that drive these ratings (the agent repeating its own earlier turns,
its question rate). Two heads on the same inputs:

- ``SpeRidge``: ridge regression per rating (standardised inputs).
- ``SpeSigmoid``: the paper's form, a linear layer with a sigmoid output per rating trained by
  squared error on the [0, 1] ratings. The paper fine-tuned RoBERTa under that head; here the
  encoder stays frozen (MiniLM, cached), which keeps the cost to seconds per agent.

The estimate is the mean predicted rating over the agent's dialogues.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from enigma.comparators.calibration import RatingRegressor
from enigma.comparators.config import ComparatorsConfig, fingerprint_of
from enigma.comparators.dialogues import (
    AgentDialogue,
    ComparatorInputError,
    logged_dialogues,
    rating_matrix,
    target_dialogues,
)
from enigma.comparators.embedding import LazyEmbedder
from enigma.comparators.features import Embedder, FeatureExtractor
from enigma.contracts import EstimateResult, HeldOutAgent, Regime
from enigma.store.experience import ExperienceStore

SPE_EXTRA_FEATURES: tuple[str, ...] = ("self_repetition", "question_rate")


def mean_reply_embeddings(dialogues: Sequence[AgentDialogue], embedder: Embedder) -> np.ndarray:
    """[n_dialogues, d]: the mean embedding of each dialogue's scored agent replies."""
    index: dict[str, int] = {}
    for d in dialogues:
        if not d.scored:
            raise ComparatorInputError(f"dialogue {d.dialog_id}: no agent turn to score")
        for x in d.scored_texts():
            index.setdefault(x, len(index))
    vecs = np.asarray(embedder.embed(list(index)), dtype=np.float64)
    if vecs.shape[0] != len(index):
        raise ValueError(f"embedder returned {vecs.shape[0]} vectors for {len(index)} texts")
    return np.stack([vecs[[index[x] for x in d.scored_texts()]].mean(axis=0) for d in dialogues])


def spe_inputs(dialogues: Sequence[AgentDialogue], embedder: Embedder, extra: Sequence[str] = SPE_EXTRA_FEATURES) -> np.ndarray:
    emb = mean_reply_embeddings(dialogues, embedder)
    if not extra:
        return emb
    return np.hstack([emb, FeatureExtractor().matrix(dialogues, extra)])


class _SpeBase:
    regimes: frozenset[Regime]
    kind = ""

    def __init__(
        self,
        regime: Regime = Regime.OWN_ROLLOUTS,
        config: ComparatorsConfig | None = None,
        embedder: Embedder | None = None,
        extra_features: Sequence[str] = SPE_EXTRA_FEATURES,
    ):
        self.regime = regime
        self.regimes = frozenset({regime})
        self.config = config or ComparatorsConfig()
        self.embedder = embedder if embedder is not None else LazyEmbedder(self.config)
        self.extra = tuple(extra_features)
        self.name = f"spe:{self.kind}[{regime.value}]"

    def fingerprint(self) -> str:
        return fingerprint_of("spe", self.kind, self.regime.value, self.extra, self.config.embedding_model, self.config.spe)

    def estimate(self, experience: ExperienceStore, target: HeldOutAgent) -> EstimateResult:
        names = experience.rating_names
        train = logged_dialogues(experience)
        keep = np.array([bool(d.scored) for d in train])
        y = rating_matrix(experience, names)[keep]
        x = spe_inputs([d for d, k in zip(train, keep) if k], self.embedder, self.extra)
        got = target_dialogues(experience, target, self.regime)
        xt = spe_inputs(got.dialogues, self.embedder, self.extra)
        estimates, extra = self._fit_predict(x, y, xt, names)
        return EstimateResult(estimates, diagnostics={"n_train": int(keep.sum()), "n_dialogues": len(got.dialogues), **extra})

    def _fit_predict(self, x, y, xt, names) -> tuple[dict[str, float], dict]:
        """Estimates of the target's inputs ``xt`` from a model fitted on ``x``, ``y``; and
        what the fit reports."""
        raise NotImplementedError


class SpeRidge(_SpeBase):
    kind = "ridge"

    def _fit_predict(self, x, y, xt, names):
        return RatingRegressor.fit(x, y, names, self.config.spe.ridge_alpha).estimate(xt), {}


class SigmoidHead(torch.nn.Module):
    """Linear map to one logit per rating, squashed to [0, 1]."""

    def __init__(self, dim: int, n_ratings: int):
        super().__init__()
        self.linear = torch.nn.Linear(dim, n_ratings)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.linear(x))


def masked_mse(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Squared error over the rated entries only (NaN marks an unrated dialogue)."""
    mask = ~torch.isnan(y)
    if not mask.any():
        raise ValueError("no rated entry to train on")
    diff = torch.where(mask, pred - torch.nan_to_num(y), torch.zeros_like(pred))
    return (diff**2).sum() / mask.sum()


def train_sigmoid_head(x: np.ndarray, y: np.ndarray, epochs: int, lr: float, weight_decay: float, seed: int):
    """Full-batch AdamW on standardised inputs; returns a predict function."""
    mu, sd = x.mean(axis=0), x.std(axis=0)
    sd[sd == 0] = 1.0
    gen = torch.Generator().manual_seed(seed)
    xt = torch.as_tensor((x - mu) / sd, dtype=torch.float32)
    yt = torch.as_tensor(y, dtype=torch.float32)
    head = SigmoidHead(x.shape[1], y.shape[1])
    with torch.no_grad():
        torch.nn.init.normal_(head.linear.weight, std=0.01, generator=gen)
        # start at the mean rating, so training only has to learn the differences
        p = np.clip(np.nanmean(y, axis=0), 1e-3, 1 - 1e-3)
        head.linear.bias.copy_(torch.as_tensor(np.log(p / (1 - p)), dtype=torch.float32))
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(epochs):
        opt.zero_grad()
        loss = masked_mse(head(xt), yt)
        loss.backward()
        opt.step()

    def predict(xn: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return head(torch.as_tensor((xn - mu) / sd, dtype=torch.float32)).numpy()

    return predict, float(loss.detach())


class SpeSigmoid(_SpeBase):
    kind = "sigmoid"

    def _fit_predict(self, x, y, xt, names):
        c = self.config.spe
        predict, loss = train_sigmoid_head(x, y, c.head_epochs, c.head_lr, c.head_weight_decay, c.seed)
        p = predict(xt).mean(axis=0)
        return {n: float(v) for n, v in zip(names, p)}, {"train_loss": loss}
