"""The ``simulate`` section of params.yaml: settings only, so that reading params.yaml does not
load the simulator (``enigma.sim.generate`` runs it, ``enigma.sim.sellers`` holds the presets)."""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_AGENT_TURNS = 8  # the longest dialogue has 8 agent turns; every seller acts by then
# The presets' names; their sellers are enigma.sim.sellers.PRESETS, which refuses to load if the
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

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str) -> str:
        if v not in PRESET_NAMES:
            raise ValueError(f"unknown preset {v!r}; known: {sorted(PRESET_NAMES)}")
        return v

    def fingerprint(self) -> str:
        data = self.model_dump()
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
