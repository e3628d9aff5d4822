"""The zeta and nu heads on the encoder vector, the pseudo-slot scalars and lambda.

Each head is Linear(d, h) -> GELU -> Linear(h, 1) (``h = 0`` gives a linear head, which on
one-hot features is a table). zeta goes through its output activation (square by default) so
that it stays non-negative; nu has none. The last layers start at zero weight, with zeta's
bias set so that zeta starts at 1 and nu at 0 everywhere, as the pseudo slots do: a square
activation has zero gradient at 0, so starting there would freeze zeta.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def _head(dim: int, hidden: int) -> nn.Sequential:
    if hidden == 0:
        return nn.Sequential(nn.Linear(dim, 1))
    return nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, 1))


def zeta_activation(x: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "square":
        return x * x
    if kind == "shifted_square":
        return (x + 1) * (x + 1)
    if kind == "softplus":
        return nn.functional.softplus(x)
    if kind == "none":
        return x
    raise ValueError(f"unknown zeta activation {kind!r}")


def _preimage_of_one(kind: str) -> float:
    """The raw output for which the activation gives zeta = 1."""
    return {"square": 1.0, "shifted_square": 0.0, "softplus": math.log(math.e - 1), "none": 1.0}[kind]


class DiceHeads(nn.Module):
    def __init__(self, dim: int, hidden: int, tmax: int, activation: str = "square", lambda_per_slot: bool = False):
        super().__init__()
        self.activation = activation
        self.zeta_net = _head(dim, hidden)
        self.nu_net = _head(dim, hidden)
        start = _preimage_of_one(activation)
        for net, bias in ((self.zeta_net, start), (self.nu_net, 0.0)):
            nn.init.zeros_(net[-1].weight)
            nn.init.constant_(net[-1].bias, bias)
        # Pseudo slots: raw zeta parameter (through the same activation) and nu per position.
        self.zeta_pad_raw = nn.Parameter(torch.full((tmax,), start))
        self.nu_pad = nn.Parameter(torch.zeros(tmax))
        self.lam = nn.Parameter(torch.zeros(tmax if lambda_per_slot else 1))

    def zeta(self, vec: torch.Tensor) -> torch.Tensor:
        return zeta_activation(self.zeta_net(vec).squeeze(-1), self.activation)

    def nu(self, vec: torch.Tensor) -> torch.Tensor:
        return self.nu_net(vec).squeeze(-1)

    def zeta_pad(self) -> torch.Tensor:
        return zeta_activation(self.zeta_pad_raw, self.activation)

    def zeta_parameters(self) -> list[nn.Parameter]:
        return list(self.zeta_net.parameters()) + [self.zeta_pad_raw]

    def nu_parameters(self) -> list[nn.Parameter]:
        return list(self.nu_net.parameters()) + [self.nu_pad]
