"""What a dialogue is made of: turns, each an utterance of the user or of the agent, and the
history of them that an agent answers. The store produces them, agents answer them and
estimators read them; this module imports nothing of enigma.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

Role = Literal["user", "agent"]
ROLES: tuple[str, ...] = ("user", "agent")


@dataclass(frozen=True)
class Turn:
    """One utterance. ``user`` is the human (or simulated customer) side, ``agent`` the
    system under evaluation."""

    role: Role
    text: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown role {self.role!r}; expected one of {ROLES}")


History = Sequence[Turn]
