"""What a DICE solver returns: ``Solution``, the fitted heads, the features the final pass reads
and the learning curve. The solvers (``gda``, ``exact_nu``) return it for a ``problem.DiceData``;
the trainer turns it into estimates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from enigma.ope.features import Features
from enigma.ope.heads import DiceHeads


@dataclass
class Solution:
    """A solver's result: the final heads, the features to evaluate them on (those of the final
    weights: an averaged fine-tuned encoder gives new ones), the steps run, the learning curve
    and the solver's own summary (exact_nu: iterations, final gradient, converged)."""

    heads: DiceHeads
    features: Features
    steps: int
    curve: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
