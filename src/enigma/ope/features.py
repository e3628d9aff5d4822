"""The fixed features DICE is trained on: the encoder's pair vectors at every real agent turn,
computed once for a frozen encoder (or per batch for a fine-tuned one), stored ragged
(``TurnFeatures``: one row per agent turn, so memory grows with the turns, not with the longest
dialogue), and for text features a fixed, whitened PCA projection to ``dice.project_dim``
dimensions (trailing features the encoder marks as passthrough, e.g. the agreement block, are left
alone), and, with ``dice.random_features``, random Fourier features of the result appended to it,
and with ``dice.turn_interactions`` the features times the turn's position."""

from __future__ import annotations

import math
from typing import Any

import torch

from enigma.encoders.base import PairEncoder, turn_mask, turn_positions
from enigma.ope.config import FrozenFeatures
from enigma.ope.problem import DiceData
from enigma.ope.turns import TurnFeatures


def pca_projection(stacked: torch.Tensor, k: int, seed: int, chunk_rows: int = 65536, solver: str = "randomized",
                   setting: str = "dice.project_dim") -> torch.Tensor:
    """Fixed, whitened PCA projection of frozen features onto their top ``k`` directions, fitted on
    the rows of ``stacked`` [M, d] (the logged and target vectors of real turns; zero rows are absent
    samples and are left out of the fit): lower-capacity, much cheaper heads. ``stacked`` is
    centred in place (a store's raw vectors are the largest thing a run holds: no second copy
    unless absent samples must be left out); returns the projection of every row [M, k].

    ``solver``: ``randomized`` (``torch.pca_lowrank`` with ``q = k`` and its two power iterations,
    seeded by ``seed``) or ``exact`` (the eigenvectors of the d x d scatter matrix, no seed). On
    See 2019's pair vectors (d = 1552, k = 32) the randomized subspaces of two seeds share a mean
    squared cosine of 0.80, and a randomized one and the exact one 0.86, so a run's features hang
    on its seed (``studies/results/pca_subspace.md``)."""
    nonzero = torch.cat([stacked[i : i + chunk_rows].abs().sum(-1) > 0 for i in range(0, len(stacked), chunk_rows)])
    every = bool(nonzero.all())
    rows = stacked if every else stacked[nonzero]
    mean = rows.mean(0)
    rows.sub_(mean)
    if not every:
        stacked.sub_(mean)
    n_rows = len(rows)
    if k > n_rows:
        # a small store: fewer replies than directions asked for, which no solver can give
        raise ValueError(f"{setting} {k}: the store gives only {n_rows} replies (logged and target, at its agent "
                         f"turns) to fit the projection on; set {setting} to at most {n_rows}, or null for none")
    if solver == "exact":
        sv, v = exact_principal_axes(rows, k, chunk_rows)
    elif solver == "randomized":
        # on the CPU whatever the rows' device: its random test matrix comes from the generator of
        # the device it runs on, and one drawn on a GPU gave another subspace, so estimates 0.0025
        # apart at the median and 0.027 at most from the CPU's (studies/results/ope_devices_airline_agents.md)
        torch.manual_seed(seed)
        _, sv, v = torch.pca_lowrank(rows.cpu(), q=k, center=False)
        sv, v = sv.to(rows.device), v.to(rows.device)
    else:
        raise ValueError(f"pca solver {solver!r}: expected randomized or exact")
    del rows
    # Whitened: unit variance per direction, so one learning rate suits every input scale.
    w = v / (sv / max(n_rows - 1, 1) ** 0.5).clamp(min=1e-6)
    out = stacked.new_empty((len(stacked), k))
    for i in range(0, len(stacked), chunk_rows):
        out[i : i + chunk_rows] = stacked[i : i + chunk_rows] @ w
    return out


def exact_principal_axes(rows: torch.Tensor, k: int, chunk_rows: int = 65536) -> tuple[torch.Tensor, torch.Tensor]:
    """The top ``k`` right singular vectors of centred ``rows`` [M, d] ([d, k]) and their singular
    values ([k]), from the eigendecomposition of the scatter matrix (d x d: 1552 x 1552 for the
    frozen blocks), each chunk's product in the rows' precision, their sum and the decomposition in
    float64. Each axis's sign is fixed (its largest-magnitude entry positive) so that the
    projection depends on the data alone."""
    d = rows.shape[1]
    scatter = torch.zeros((d, d), dtype=torch.float64, device=rows.device)
    for i in range(0, len(rows), chunk_rows):
        chunk = rows[i : i + chunk_rows]
        scatter += (chunk.T @ chunk).double()
    values, vectors = torch.linalg.eigh(scatter)  # ascending
    values, vectors = values.flip(0)[:k].clamp(min=0), vectors.flip(1)[:, :k]
    peak = vectors.abs().argmax(0)
    vectors = vectors * torch.sign(vectors[peak, torch.arange(k)]).unsqueeze(0)
    return values.sqrt().to(rows.dtype), vectors.to(rows.dtype)


def random_fourier_features(x: torch.Tensor, n: int, scale: float, seed: int, chunk_rows: int = 65536) -> torch.Tensor:
    """``[x | sqrt(2) cos(z W + b)]``: ``n`` random Fourier features (Rahimi and Recht 2007) of
    ``x`` [M, d] appended to it. Linear heads on them approximate functions in a Gaussian kernel's
    space, interactions of the inputs included (e.g. of agreement with position), which the linear
    part alone cannot form; keeping the linear part keeps today's heads as a special case.

    ``z`` is ``x`` standardised per column (the whitened PCA block and the agreement block have
    different scales), and the bandwidth is ``scale * sqrt(d)``: with standardised inputs the
    squared distance between two rows is about ``2 d``, so at ``scale`` 1 a typical pair sits
    where the kernel is still informative. ``sqrt(2)`` gives each feature a variance of about 1,
    like the whitened block, so relative penalties (``q_ridge``) treat both alike."""
    d = x.shape[1]
    mean, std = x.mean(0), x.std(0).clamp(min=1e-6)
    g = torch.Generator(device="cpu").manual_seed(seed)
    w = (torch.randn((d, n), generator=g, dtype=torch.float64) / (scale * math.sqrt(d))).to(x)
    b = (torch.rand(n, generator=g, dtype=torch.float64) * 2 * math.pi).to(x)
    out = x.new_empty((len(x), d + n))
    out[:, :d] = x
    for i in range(0, len(x), chunk_rows):
        out[i : i + chunk_rows, d:] = torch.cos(((x[i : i + chunk_rows] - mean) / std) @ w + b) * math.sqrt(2.0)
    return out


def turn_interactions(buf: torch.Tensor, n_agent_turns: torch.Tensor, samples: int, tmax: int) -> torch.Tensor:
    """``[x | x * p | p]`` for the rows of ``buf`` (every real turn's logged row, then its
    ``samples`` target rows), ``p = t / (Tmax - 1)`` the turn's position in its dialogue (0 at the
    first agent turn): linear heads on them weigh each feature by ``a + b p``, so the ratio can
    depend on a feature more deeply into a dialogue, as a product of per-turn ratios does."""
    _, turn = turn_positions(n_agent_turns.cpu())
    p = (turn.to(buf.dtype) / (tmax - 1)).to(buf.device)
    p = torch.cat([p, p.repeat_interleave(samples)]).unsqueeze(1)
    return torch.cat([buf, buf * p, p], 1)


class Features:
    """Encoder outputs for index batches; a frozen encoder's outputs are computed once, into
    ``turns`` (ragged; None for a trainable encoder)."""

    def __init__(self, encoder: PairEncoder, prepared: Any, data: DiceData, device: torch.device,
                 frozen: FrozenFeatures | None = None, *, tmax: int | None = None, seed: int = 0, eval_batch_size: int = 512,
                 q_project_dim: int | None = None):
        """``frozen``: what is computed once from a frozen encoder's vectors (PCA, random
        features, turn interactions; None: the vectors as they are, onehot's); ``tmax``: the
        slots, for turn interactions; ``seed``: the PCA's and the random features' draws;
        ``q_project_dim``: the fqe Q's own PCA of the text (frozen only)."""
        self._settings = dict(frozen=frozen, tmax=tmax, seed=seed, eval_batch_size=eval_batch_size, q_project_dim=q_project_dim)
        self.encoder, self.prepared, self.device, self.n = encoder, prepared, device, len(data.dialog_ids)
        self.n_agent_turns = data.n_agent_turns.long().cpu()
        self.k_max = int(data.sample_mask.shape[1])
        self.trainable = any(p.requires_grad for p in encoder.parameters())
        self.autocast = device.type == "cuda" and self.trainable
        self.turns: TurnFeatures | None = None
        self.q_turns: TurnFeatures | None = None  # the fqe Q's own text features (fqe.project_dim), else None
        self.dim = encoder.dim
        # the leading columns that describe the pair's text (not the agreement block, not random features)
        self.text_dim = encoder.dim - getattr(encoder, "passthrough_dim", 0)
        # the pair's own passthrough columns (grounding, reply measures), which follow the text's: with it, what
        # the fqe Q reads when it leaves the agreement block out
        self.pair_dim = getattr(encoder, "pair_passthrough_dim", 0)
        if not self.trainable:
            self.turns = self._fixed(data, **self._settings)

    def with_encoder(self, encoder: PairEncoder, data: DiceData) -> "Features":
        """The same features of another encoder (the gda solver's weight-averaged copy)."""
        return Features(encoder, self.prepared, data, self.device, **self._settings)

    def _fixed(self, data: DiceData, frozen: FrozenFeatures | None, tmax: int | None, seed: int, eval_batch_size: int,
               q_project_dim: int | None) -> TurnFeatures:
        """Every real turn's vectors, computed in chunks of ``eval_batch_size`` dialogues (the
        encoder's ``turn_rows``: no padded table of the whole store) into one buffer (the logged
        rows, then the target samples' rows), then projected, then random features appended."""
        t_all, s = int(self.n_agent_turns.sum()), int(data.sample_mask.shape[2])
        buf = torch.empty((t_all * (1 + s), self.dim), dtype=torch.float32, device=self.device)
        logged, target = buf[:t_all], buf[t_all:].view(t_all, s, self.dim)
        pos = 0
        for i in range(0, self.n, eval_batch_size):
            index = torch.arange(i, min(i + eval_batch_size, self.n))
            with torch.no_grad():
                lg, tg = self.encoder.turn_rows(self.prepared, index, self.n_agent_turns)
            logged[pos : pos + len(lg)] = lg.to(self.device)
            target[pos : pos + len(lg)] = tg.to(self.device)
            pos += len(lg)
        mask = data.sample_mask[turn_mask(self.n_agent_turns, self.k_max)].to(self.device)
        keep = getattr(self.encoder, "passthrough_dim", 0)  # trailing features the PCA leaves alone
        cut = self.dim - keep
        q_dim = q_project_dim if frozen is not None else None
        pca = frozen.pca if frozen is not None else "randomized"
        project_dim = frozen.project_dim if frozen is not None else None
        if q_dim:
            # the Q's own view of the pair's text, wider than the heads' (an MLP can use it; the
            # linear heads gained nothing from 128 dims): taken before the heads' PCA frees the vectors
            q_buf = buf[:, :cut] if q_dim >= cut else pca_projection(buf[:, :cut], q_dim, seed, solver=pca, setting="fqe.project_dim")
            if self.pair_dim:
                q_buf = torch.cat([q_buf, buf[:, cut : cut + self.pair_dim]], 1)
            self.q_turns = TurnFeatures(q_buf[:t_all], q_buf[t_all:].view(t_all, s, -1), mask, self.n_agent_turns.to(self.device))
        if project_dim and project_dim < cut:
            projected = buf.new_empty((len(buf), project_dim + keep))
            projected[:, :project_dim] = pca_projection(buf[:, :cut], project_dim, seed, solver=pca)
            projected[:, project_dim:] = buf[:, cut:]
            del buf, logged, target
            self.dim, self.text_dim = project_dim + keep, project_dim
            buf = projected
        if frozen is not None and frozen.random_features:
            buf = random_fourier_features(buf, frozen.random_features, frozen.random_features_scale, seed)
            self.dim = buf.shape[1]
        if frozen is not None and frozen.turn_interactions:
            buf = turn_interactions(buf, self.n_agent_turns, s, tmax)
            self.dim = buf.shape[1]
        logged, target = buf[:t_all], buf[t_all:].view(t_all, s, self.dim)
        return TurnFeatures(logged, target, mask, self.n_agent_turns.to(self.device))

    def _run(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            logged, target = self.encoder(self.prepared, index)
        return logged.float().to(self.device), target.float().to(self.device)

    def __call__(self, index: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """The padded batch layout ([B, K, d], [B, K, S, d]) of the dialogues at ``index`` (None:
        every dialogue; small problems only, it is the dense table the ragged store avoids)."""
        if self.turns is not None:
            return self.turns.dense(None if index is None else index.cpu(), self.k_max)
        return self._run(torch.arange(self.n) if index is None else index)
