"""The settings of the small language model and of the checkpoints one training run saves."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class MixConfig(BaseModel):
    """One training data mix, as a team's runs differ: every logged agent turn (the defaults), the
    agents whose logged mean ``rating`` is in the top ``top_share`` only, and/or each reply swapped,
    with probability ``swap_share``, for a reply of another logged dialogue (a noisy data pipeline)."""

    model_config = ConfigDict(extra="forbid")

    top_share: float = Field(1.0, gt=0, le=1)
    rating: str = "reward"
    swap_share: float = Field(0.0, ge=0, le=1)


class LMConfig(BaseModel):
    """A GPT-2-style model and its byte-level BPE tokenizer, trained from nothing on 2 cores."""

    model_config = ConfigDict(extra="forbid")

    vocab_size: int = Field(1024, ge=300)
    n_layer: int = Field(2, ge=1)
    n_embd: int = Field(128, ge=16)
    n_head: int = Field(4, ge=1)
    max_tokens: int = Field(320, ge=32)  # the model's window: prompt (cut on the left) and reply
    history_turns: int = Field(8, ge=1)  # the turns before a reply in its prompt, as sample.agents.hf.max_history_turns
    batch_size: int = Field(16, ge=1)
    lr: float = Field(3e-3, gt=0)
    warmup_steps: int = Field(30, ge=0)
    weight_decay: float = Field(0.01, ge=0)
    seed: int = 0
    mixes: dict[str, MixConfig] = {"all": MixConfig()}
    save_at: list[int] = Field([100, 300], min_length=1)  # optimiser steps after which a checkpoint is saved

    @model_validator(mode="after")
    def _check(self) -> "LMConfig":
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not a multiple of n_head {self.n_head}")
        if sorted(set(self.save_at)) != self.save_at or self.save_at[0] < 1:
            raise ValueError(f"save_at {self.save_at}: give increasing step counts of at least 1")
        if not self.mixes:
            raise ValueError("mixes: give at least one data mix")
        return self

    def checkpoint_names(self) -> list[str]:
        """The checkpoints one build saves, in training order within each mix."""
        return [checkpoint_name(mix, step) for mix in self.mixes for step in self.save_at]


def checkpoint_name(mix: str, step: int) -> str:
    return f"{mix}-step{step:05d}"
