"""Typed sections of params.yaml that the flows read: ``pipeline`` (task runner, retries,
benchmarks) and ``nightly`` (registry, schedule)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from enigma.params import DEFAULT_PARAMS, section
from enigma.rollouts.learned_customer import LearnedCustomerConfig


class IngestStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: str  # a reader of enigma.store.readers (see2019, see2019-selfplay, fed, jsonl, parquet)
    path: Path
    out: Path


class FullRun(BaseModel):
    """Estimators too slow for a benchmark's main run. They write their own results directory
    (a DVC output of its own; the main run's stays untouched), and the full report reads both:
    every estimator of the benchmark side by side."""

    model_config = ConfigDict(extra="forbid")

    estimators: list[str]
    results_dir: Path
    report_dir: Path


class BenchmarkConfig(BaseModel):
    """Where one benchmark's stages read and write (the same paths as its dvc.yaml stages)."""

    model_config = ConfigDict(extra="forbid")

    # simulate (the airline simulator), ingest (raw logs), or existing (a store already built,
    # e.g. by `enigma ingest` or the dvc stages)
    source: Literal["simulate", "ingest", "existing"] = "existing"
    store: Path  # the experience store directory that simulation or ingestion writes
    # source ingest: every raw input to ingest (the rated logs into ``store``, and e.g. the
    # self-play transcripts the stand-in agents retrieve from)
    ingest: list[IngestStep] = []
    truth: Path | None = None  # simulator truth.parquet; None: each agent's own mean rating
    # How to build the held-out agent; ``{agent}`` is replaced by its agent id.
    agent_spec: str
    targets_dir: Path
    # A store of the agents' own unrated dialogues (self-play or simulated-user rollouts), for
    # the estimators of the own-rollouts regime; None: such estimators cannot run.
    rollouts: Path | None = None
    # Set: the rollouts store is MADE by the `rollouts` stage (each agent talking with a customer
    # learned from the other agents' logged dialogues); None: it is given (e.g. See 2019's
    # self-play transcripts, ingested).
    learned_customer: LearnedCustomerConfig | None = None
    results_dir: Path
    report_dir: Path
    estimators: list[str] = ["enigma"]
    # The slow estimators, kept out of the main job's budget: their own DVC stages
    # (train_<benchmark>_full, report_<benchmark>_full) run them and report them beside these.
    full: FullRun | None = None
    # Estimators that score from the agent's replies at logged states need sampled targets.
    n_samples: int = Field(1, ge=1)
    seed: int = 0
    agents: list[str] | None = None  # None: every agent of the store
    # Shown in the report (e.g. "bots stood in for by their self-play transcripts").
    note: str | None = None


class PipelineConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    runner: Literal["threads", "dask"] = "threads"
    # Bounded: Prefect's thread pool is unbounded by default, and the machines have 2 cores.
    max_workers: int = Field(2, ge=1)
    dask_address: str | None = None  # e.g. tcp://scheduler:8786; None: a local cluster
    dask_n_workers: int = Field(2, ge=1)
    retries: int = Field(2, ge=0)  # for steps that call agents (remote agents are flaky)
    retry_delay_seconds: float = Field(10.0, ge=0)
    sampling_cache: Path = Path("data/work/sampling-cache")
    benchmarks: dict[str, BenchmarkConfig] = {}


class NightlyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    registry: Path = Path("agents.yaml")  # a YAML file of named specs, or a folder of checkpoints
    checkpoint_spec: str = "hf:{path}"  # spec of a checkpoint folder entry
    store: Path = Path("data/airline/store")  # the rated experience the agents are scored on
    seen: Path = Path("data/work/nightly/seen.json")
    work_dir: Path = Path("data/work/nightly")
    report_dir: Path = Path("reports/nightly")
    estimators: list[str] = ["enigma"]
    n_samples: int = Field(1, ge=1)
    seed: int = 0
    cron: str = "0 2 * * *"
    deployment: str = "enigma-nightly"


def pipeline_config(path: str | Path = DEFAULT_PARAMS) -> PipelineConfig:
    return section(PipelineConfig, "pipeline", path)


def nightly_config(path: str | Path = DEFAULT_PARAMS, **overrides) -> NightlyConfig:
    return section(NightlyConfig, "nightly", path, **overrides)
