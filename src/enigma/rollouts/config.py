"""``benchmarks.<name>.rollouts.learned_customer`` of params.yaml: settings only, so that reading
params.yaml does not load the learned customer (``enigma.rollouts.learned_customer``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class LearnedCustomerConfig(BaseModel):
    """``benchmarks.<name>.rollouts.learned_customer`` in params.yaml."""

    model_config = ConfigDict(extra="forbid")

    episodes: int = Field(100, ge=1)  # rollouts per agent
    similarity: Literal["embedding", "words"] = "embedding"
    end_neighbours: int = Field(1, ge=1)  # nearest logged agent turns that vote on "this reply ends it"
    # None: the most agent turns of any logged dialogue of the customer's experience
    max_agent_turns: int | None = Field(None, ge=1)
    seed: int = 0
    embedding_model: str = "minilm"
    cache_dir: str | None = "cache/embeddings"  # the EmbeddingCache the other stages share
