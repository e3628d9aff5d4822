"""The ``simulate`` section of params.yaml: settings only, so that reading params.yaml does not
load the simulator (``enigma.sim.generate`` runs it, ``enigma.sim.seller_presets`` holds the presets)."""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_AGENT_TURNS = 8  # the longest dialogue has 8 agent turns; every seller acts by then
# The presets' names; their sellers are enigma.sim.seller_presets.PRESETS, which refuses to load if the
# two ever differ.
PRESET_NAMES = ("airline24", "rule6", "airline-heldout")


class SimulateConfig(BaseModel):
    """The ``simulate`` section of params.yaml."""

    model_config = ConfigDict(extra="forbid")

    preset: str = "airline24"
    seed: int = 0
    dialogues_per_agent: int = Field(100, ge=1)
    truth_rollouts: int = Field(2000, ge=2)
    max_stderr: float = Field(0.01, gt=0)
    truth_batch: int = Field(500, ge=1)
    max_truth_rollouts: int = Field(10000, ge=2)
    customer_noise: float = Field(0.15, ge=0, le=1)
    max_agent_turns: int = Field(MAX_AGENT_TURNS, ge=1, le=MAX_AGENT_TURNS)
    # exchanges of thanks after the agent ends each dialogue (enigma.sim.rollout): the rating then
    # comes that many exchanges after the turn that decided it
    closing_exchanges: int = Field(0, ge=0, le=32)

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str) -> str:
        if v not in PRESET_NAMES:
            raise ValueError(f"unknown preset {v!r}; known: {sorted(PRESET_NAMES)}")
        return v

    def settings(self) -> dict:
        """The settings as the store's manifest records them: ``closing_exchanges`` only where it
        is set, so the stores made before it existed stay byte-identical."""
        data = self.model_dump()
        if not data["closing_exchanges"]:
            del data["closing_exchanges"]
        return data

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.settings(), sort_keys=True).encode()).hexdigest()[:16]
