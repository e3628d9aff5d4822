"""The fixed features DICE is trained on: the encoder's pair vectors for every dialogue, computed
once for a frozen encoder (or per batch for a fine-tuned one), and for text features a fixed,
whitened PCA projection to ``dice.project_dim`` dimensions (trailing features the encoder marks
as passthrough, e.g. the agreement block, are left alone)."""

from __future__ import annotations

from typing import Any

import torch

from enigma.encoders.base import PairEncoder
from enigma.ope.config import DiceConfig


def pca_projection(logged: torch.Tensor, target: torch.Tensor, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Fixed, whitened PCA projection of frozen features onto their top ``k`` directions (fitted on
    the logged and target vectors of real turns): lower-capacity, much cheaper heads."""
    flat = torch.cat([logged.reshape(-1, logged.shape[-1]), target.reshape(-1, target.shape[-1])])
    rows = flat[flat.abs().sum(-1) > 0]
    mean = rows.mean(0)
    torch.manual_seed(seed)
    _, sv, v = torch.pca_lowrank(rows - mean, q=k, center=False)
    # Whitened: unit variance per direction, so one learning rate suits every input scale.
    w = v / (sv / max(len(rows) - 1, 1) ** 0.5).clamp(min=1e-6)
    return (logged - mean) @ w, (target - mean) @ w


class Features:
    """Encoder outputs for index batches; a frozen encoder's outputs are computed once."""

    def __init__(self, encoder: PairEncoder, prepared: Any, n: int, device: torch.device, cfg: DiceConfig):
        self.encoder, self.prepared, self.device, self.n = encoder, prepared, device, n
        self.trainable = any(p.requires_grad for p in encoder.parameters())
        self.autocast = device.type == "cuda" and self.trainable
        self.cache: tuple[torch.Tensor, torch.Tensor] | None = None
        self.dim = encoder.dim
        if not self.trainable:
            parts = [self._run(torch.arange(i, min(i + cfg.eval_batch_size, n))) for i in range(0, n, cfg.eval_batch_size)]
            self.cache = (torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts]))
            keep = getattr(encoder, "passthrough_dim", 0)  # trailing features the PCA leaves alone
            if cfg.project_dim and cfg.project_dim < self.dim - keep:
                logged, target = self.cache
                cut = self.dim - keep
                pl, pt = pca_projection(logged[..., :cut], target[..., :cut], cfg.project_dim, cfg.seed)
                self.cache = (torch.cat([pl, logged[..., cut:]], -1), torch.cat([pt, target[..., cut:]], -1))
                self.dim = cfg.project_dim + keep

    def _run(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            logged, target = self.encoder(self.prepared, index)
        return logged.float().to(self.device), target.float().to(self.device)

    def __call__(self, index: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """``index`` None means every dialogue (no copy of a cached table)."""
        if self.cache is not None:
            if index is None:
                return self.cache
            i = index.to(self.cache[0].device)
            return self.cache[0][i], self.cache[1][i]
        return self._run(torch.arange(self.n) if index is None else index)
