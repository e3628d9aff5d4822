"""Typed settings of the text encoders (the ``encode`` section of params.yaml).

Which encoder the estimator uses (onehot / frozen / finetune) and which weights are the DICE
configuration's business (``dice.encoder``, ``dice.encoder_model``); this section holds how the
text encoders run: the embedding cache, the frozen featurisation, the packed sequence.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# How a setting names a knowledge base (dice.knowledge, benchmarks.<b>.knowledge, nightly.knowledge):
# enigma.encoders.knowledge.load_knowledge loads it. Here, with the settings, so that a section
# checks the pattern without importing the knowledge code.
KNOWLEDGE_SPEC = r"^python:[\w.]+:\w+$"
# Why no base may judge the replies of a stand-in that does not record their sources
# (enigma.agents.config.unsourced_stand_in), in every place that refuses the pair
# (studies/results/standin_cost_airline.md, standin_sources_airline.md)
STAND_IN_REFUSAL = ("a retrieval stand-in's replies come from other conversations, so a knowledge base would judge "
                    "them against dialogues they were not said in (on airline it cost ENIGMA 0.126 of mean Pearson), "
                    "unless the stand-in records where each reply was said (sample.agents.transcripts.sources: true)")


class CacheConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cache_dir: str | None = None  # null: $ENIGMA_CACHE_DIR/embeddings or ~/.cache/enigma/embeddings
    batch_size: int = Field(64, ge=1)
    max_length: int = Field(256, ge=2, description="tokens per text; longer texts keep their first ones")
    shard_size: int = Field(2048, ge=1, description="texts per shard: an interruption loses at most this many")


class FrozenConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    position_buckets: int = Field(16, ge=1)
    projection_dim: int | None = Field(None, ge=1, description="a trainable linear map on top; null: none")
    blocks: list[Literal["last_user", "prev_agent", "summary", "first_user", "position"]] = ["last_user", "prev_agent", "summary", "position"]


class FinetuneConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_utterance_tokens: int = Field(64, ge=1)
    gradient_checkpointing: bool = False
    autocast: bool = True  # bf16 (fp16 where unsupported) on CUDA; ignored on CPU


class EncodeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str = "minilm"  # minilm | mpnet | a local Hugging Face directory
    weights_cache_dir: str | None = None  # where mpnet is unpacked; null: ~/.cache/enigma/weights
    cache: CacheConfig = CacheConfig()
    frozen: FrozenConfig = FrozenConfig()
    finetune: FinetuneConfig = FinetuneConfig()

    def embedding_cache(self, model: str | os.PathLike[str] | None = None, progress: bool = False):
        from enigma.encoders.text_cache import EmbeddingCache

        c = self.cache
        return EmbeddingCache(
            model or self.model, c.cache_dir, batch_size=c.batch_size, max_length=c.max_length,
            shard_size=c.shard_size, progress=progress, weights_cache_dir=self.weights_cache_dir,
        )

    def frozen_encoder(self, model: str | os.PathLike[str] | None = None):
        from enigma.encoders.frozen import FrozenPairEncoder

        return FrozenPairEncoder(
            self.embedding_cache(model), position_buckets=self.frozen.position_buckets,
            projection_dim=self.frozen.projection_dim, blocks=tuple(self.frozen.blocks),
        )

    def finetune_encoder(self, model: str | os.PathLike[str] | None = None):
        from enigma.encoders.finetune import FinetunePairEncoder

        f = self.finetune
        return FinetunePairEncoder(
            model or self.model, max_utterance_tokens=f.max_utterance_tokens,
            gradient_checkpointing=f.gradient_checkpointing, autocast=f.autocast, weights_cache_dir=self.weights_cache_dir,
        )
