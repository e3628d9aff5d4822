"""Two small agents that ship with the package, so that ``enigma serve`` and ``enigma sample``
can be tried without writing one (``python:enigma.agents.examples:echo`` or ``:stochastic``).

- ``echo``: quotes the last turn plus a number drawn from the seed, so a reply shows what the
  agent was asked and the same seed gives the same reply.
- ``stochastic``: ignores the dialogue and draws each reply independently from a declared
  distribution (``StochasticAgent.distribution``). Its policy is known exactly, which makes it a
  target for statistical checks of sampling and estimation.
"""

from __future__ import annotations

import random
from typing import Mapping

from enigma.dialogue import History


class EchoAgent:
    def respond(self, history: History, n: int = 1, seed: int | None = None) -> list[str]:
        last = history[-1].text if history else "<start>"
        rng = random.Random(seed)
        return [f"re: {last} [{rng.randrange(10**6)}]" for _ in range(n)]


# The stochastic agent's policy: reply -> probability, the same at every state.
DISTRIBUTION: dict[str, float] = {
    "Sure, I can help with that.": 0.5,
    "Could you tell me a bit more?": 0.3,
    "Sorry, I cannot do that.": 0.2,
}


class StochasticAgent:
    def __init__(self, distribution: Mapping[str, float] = DISTRIBUTION):
        if not distribution or any(p < 0 for p in distribution.values()) or abs(sum(distribution.values()) - 1) > 1e-9:
            raise ValueError(f"StochasticAgent: probabilities must be non-negative and sum to 1, got {dict(distribution)}")
        self.distribution = dict(distribution)

    def respond(self, history: History, n: int = 1, seed: int | None = None) -> list[str]:
        rng = random.Random(seed)  # seed None: fresh randomness on every call
        return rng.choices(list(self.distribution), weights=list(self.distribution.values()), k=n)

    def fingerprint_parts(self) -> dict[str, float]:
        return self.distribution


def echo() -> EchoAgent:
    return EchoAgent()


def stochastic() -> StochasticAgent:
    return StochasticAgent()
