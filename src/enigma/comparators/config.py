"""Typed settings of the comparators (the ``comparators`` section of params.yaml)."""

from __future__ import annotations


from pydantic import BaseModel, ConfigDict, Field



class SpeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ridge_alpha: float = Field(10.0, gt=0)
    # the paper-style head: a logistic output on the frozen features, trained by squared error
    head_epochs: int = Field(300, ge=1)
    head_lr: float = Field(0.01, gt=0)
    head_weight_decay: float = Field(1e-3, ge=0)
    seed: int = 0


class OverlapConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # MiniLM-L6 has 6 layers; BERTScore reads the hidden states of this one
    bertscore_layer: int = Field(6, ge=1)
    bertscore_batch_size: int = Field(64, ge=1)
    # BERTScore encodes each pair; a fixed-seed subsample keeps it to seconds per agent
    bertscore_max_pairs: int = Field(1000, ge=1)
    seed: int = 0


class PerplexityConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # replies scored per agent (a fixed-seed subsample): the LM's cost is its tokens, context
    # included; 200 replies with 192 context tokens took 330-450 s per agent on the shared
    # 2-core machine (studies/results/comparators_cost.json), hence the smaller default
    max_replies: int = Field(64, ge=1)
    context_turns: int = Field(2, ge=0)
    max_context_tokens: int = Field(96, ge=8)
    seed: int = 0


class AdemConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pca_dim: int = Field(20, ge=1)  # ADEM reduced its embeddings to a few tens of dimensions
    context_turns: int = Field(2, ge=1)
    l2: float = Field(1e-3, ge=0)
    epochs: int = Field(100, ge=1)  # full-batch steps
    lr: float = Field(0.01, gt=0)
    seed: int = 0


class DynaEvalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hidden: int = Field(64, ge=1)
    window: int = Field(2, ge=1)  # utterances each side joined in the graph
    margin: float = Field(1.0, gt=0)
    replace_share: float = Field(0.2, gt=0, le=1)  # share of utterances replaced in a negative
    epochs: int = Field(3, ge=1)
    batch_size: int = Field(64, ge=1)
    lr: float = Field(1e-3, gt=0)
    seed: int = 0


class CriticConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    context_turns: int = Field(2, ge=1)
    hidden: int = Field(128, ge=1)
    dropout: float = Field(0.2, ge=0, lt=1)
    dropout_passes: int = Field(5, ge=1)  # pessimism: min over this many dropout passes
    tau: float = Field(0.01, gt=0, le=1)  # Polyak rate of the target network, per step
    epochs: int = Field(20, ge=1)
    batch_size: int = Field(256, ge=1)
    lr: float = Field(1e-3, gt=0)
    seed: int = 0


class ComparatorsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    embedding_model: str = "minilm"  # a name or directory for enigma.encoders.weights
    cache_dir: str | None = None  # EmbeddingCache's directory (None: its default)
    ridge_alpha: float = Field(1.0, gt=0)
    spe: SpeConfig = SpeConfig()
    overlap: OverlapConfig = OverlapConfig()
    perplexity: PerplexityConfig = PerplexityConfig()
    adem: AdemConfig = AdemConfig()
    dynaeval: DynaEvalConfig = DynaEvalConfig()
    critic: CriticConfig = CriticConfig()


def fingerprint_of(*parts: object) -> str:
    """A stable text of the settings that change an estimator's result (the leave-one-agent-out
    runner reuses a saved result only while it is unchanged): pydantic sections as JSON."""
    import json

    return json.dumps(
        [p.model_dump(mode="json") if isinstance(p, BaseModel) else p for p in parts], sort_keys=True, default=str
    )
