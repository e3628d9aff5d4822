"""The typed ``benchmarks``, ``pipeline`` and ``nightly`` sections of params.yaml.

A benchmark is one entry of ``benchmarks``; its paths follow from its name, so that dvc.yaml can
stamp its stages out with ``foreach`` and the entry says only what differs between benchmarks:
``<data_dir>/<name>/`` holds ``store``, ``truth.parquet``, ``rollouts``, ``targets``,
``results`` and ``results_full`` (``pipeline.full_results``); its reports go to ``<report.out_dir>/<name>`` and
``<name>_full``. Every key of an entry is required: dvc.yaml reads them too, and a key it cannot
find breaks every stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from enigma.encoders.config import KNOWLEDGE_SPEC
from enigma.lm.config import LMConfig
from enigma.rollouts.config import LearnedCustomerConfig


class SourceConfig(BaseModel):
    """Where a benchmark's rated store comes from: ``simulate`` (the airline simulator: the
    ``simulate`` section with these keys overridden, e.g. ``{seed: 1}``) or ``ingest`` (a reader
    of ``enigma.store.readers``, e.g. ``see2019`` or ``jsonl``, reading ``path``)."""

    model_config = ConfigDict(extra="forbid")

    # What the store is made from, and what its stage depends on: the raw logs (ingest) or the
    # simulator's code, src/enigma/sim (simulate).
    path: Path
    simulate: dict[str, Any] | None = None
    ingest: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "SourceConfig":
        if (self.simulate is None) == (self.ingest is None):
            raise ValueError("source: give exactly one of 'simulate' (overrides of the simulate section, {} for none) "
                             "or 'ingest' (the format of the raw logs at 'path')")
        return self


class RolloutsConfig(BaseModel):
    """The agents' own unrated dialogues, for the estimators of the own-rollouts regime: made by
    letting each agent talk with a customer learned from the OTHER agents' logged dialogues
    (``learned_customer``; agents that can run, e.g. the airline sellers), or read from the
    source's folder (``ingest``: its format, e.g. See 2019's self-play transcripts)."""

    model_config = ConfigDict(extra="forbid")

    learned_customer: LearnedCustomerConfig | None = None
    ingest: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "RolloutsConfig":
        if (self.learned_customer is None) == (self.ingest is None):
            raise ValueError("rollouts: give exactly one of 'learned_customer' or 'ingest' (or rollouts: null for none)")
        return self


class BenchmarkConfig(BaseModel):
    """One entry of ``benchmarks``."""

    model_config = ConfigDict(extra="forbid")

    source: SourceConfig
    # None: the agents have no rollouts, and own-rollouts estimators cannot run. With rollouts,
    # only the agents that have some are held out (e.g. See 2019's human baseline has no
    # self-play: it stays in everyone's experience but is not scored).
    rollouts: RolloutsConfig | None
    # How to build a held-out agent: ``{agent}`` is its id, ``{rollouts}`` this benchmark's
    # rollouts folder (e.g. ``transcripts:{rollouts}?agent={agent}``), ``{store}`` its rated store
    # (e.g. ``transcripts:{store}?agent={agent}``: the agent's own chats, ratings unread).
    agent_spec: str
    # What the agents' world knows, 'python:<module>:<factory>' (enigma.encoders.knowledge; e.g.
    # the airline timetable and reservation book): every ENIGMA estimator of the benchmark reads
    # it, except an entry that sets dice.knowledge itself (null: a studied setting stays as it
    # was studied); null: the benchmark has none. A retrieval stand-in (transcripts agent_spec)
    # cannot have one: its replies were said in other conversations (the check in _check).
    knowledge: str | None = Field(pattern=KNOWLEDGE_SPEC)
    estimators: list[str]  # the main run
    # The slow ones: their own train stage and results folder, reported beside the main run's in
    # the full report ([]: none).
    full_estimators: list[str]
    # Shown in the report and beside each estimate that uses the agents' replies (e.g. "the bots
    # are stood in for by their self-play transcripts"); null: none.
    note: str | None

    @model_validator(mode="after")
    def _check(self) -> "BenchmarkConfig":
        both = sorted(set(self.estimators) & set(self.full_estimators))
        if both:
            raise ValueError(f"estimators {both} are in both 'estimators' and 'full_estimators'")
        if self.rollouts is not None and self.rollouts.ingest and self.source.ingest is None:
            raise ValueError("rollouts: ingest reads the source's folder, so the source must be ingest too")
        return self


@dataclass(frozen=True)
class Benchmark:
    """One benchmark with its paths resolved."""

    name: str
    config: BenchmarkConfig
    data_dir: Path  # <pipeline.data_dir>/<name>
    report_root: Path  # report.out_dir
    full_results: str = "results_full"  # pipeline.full_results

    @property
    def store(self) -> Path:
        return self.data_dir / "store"

    @property
    def truth(self) -> Path:
        return self.data_dir / "truth.parquet"

    @property
    def rollouts(self) -> Path | None:
        return self.data_dir / "rollouts" if self.config.rollouts is not None else None

    @property
    def targets_dir(self) -> Path:
        return self.data_dir / "targets"

    def results_dir(self, full: bool = False) -> Path:
        return self.data_dir / (self.full_results if full else "results")

    def report_dir(self, full: bool = False) -> Path:
        return self.report_root / (f"{self.name}_full" if full else self.name)

    def estimators(self, full: bool = False) -> list[str]:
        return list(self.config.full_estimators if full else self.config.estimators)

    def agent_spec(self, agent_id: str) -> str:
        spec = self.config.agent_spec.replace("{agent}", agent_id)
        if "{rollouts}" in spec:
            if self.rollouts is None:
                raise ValueError(f"benchmarks.{self.name}.agent_spec names {{rollouts}} but the benchmark has none")
            spec = spec.replace("{rollouts}", str(self.rollouts))
        return spec.replace("{store}", str(self.store))


class PipelineConfig(BaseModel):
    """How the stages run: the Prefect flows' task runner, and where benchmarks keep their data."""

    model_config = ConfigDict(extra="forbid")

    data_dir: Path = Path("data")  # benchmark <name> keeps its data in <data_dir>/<name>/
    # The folder of <data_dir>/<name>/ the full run's results go to: studies/params.yaml sets its
    # own, so the lab's rows never write into the product's (a DVC output of train_full).
    full_results: str = Field("results_full", pattern=r"^[A-Za-z0-9_.-]+$")
    # threads: a bounded pool (Prefect's own is unbounded); dask: a local cluster or dask_address
    runner: Literal["threads", "dask"] = "threads"
    # The flows' thread pool, and the train stage's estimators in parallel (one process each).
    max_workers: int = Field(2, ge=1)
    dask_address: str | None = None  # e.g. tcp://scheduler:8786; None: a local cluster
    dask_n_workers: int = Field(2, ge=1)
    retries: int = Field(2, ge=0)  # for steps that call agents (remote agents are flaky)
    retry_delay_seconds: float = Field(10.0, ge=0)

    @model_validator(mode="after")
    def _full_results_apart(self) -> "PipelineConfig":
        if self.full_results in ("results", "store", "rollouts", "targets", "truth.parquet"):
            raise ValueError(f"full_results: {self.full_results!r} is another output of the benchmark's folder; "
                             "name a folder of its own (results_full, or the lab's results_studies)")
        return self


class NightlyConfig(BaseModel):
    """The nightly job: new agents of a registry, scored on a rated store."""

    model_config = ConfigDict(extra="forbid")

    registry: Path = Path("agents.yaml")  # a YAML file of named specs, or a folder of checkpoints
    checkpoint_spec: str = "hf:{path}"  # spec of a checkpoint folder entry
    store: Path = Path("data/airline/store")  # the rated experience the agents are scored on
    seen: Path = Path("data/work/nightly/seen.json")
    work_dir: Path = Path("data/work/nightly")
    report_dir: Path = Path("reports/nightly")
    estimators: list[str] = ["enigma"]
    # the store's knowledge base, as its benchmark's (benchmarks.<b>.knowledge): the estimates
    # must be made as the calibration results were
    knowledge: str | None = Field(None, pattern=KNOWLEDGE_SPEC)
    # the comparison with the registry (enigma.pipeline.compare): on this rating, at this level,
    # the interval and the verdict calibrated on the store's agents' leave-one-agent-out results
    compare_rating: str = "reward"
    interval_level: float = Field(0.95, gt=0, lt=1)
    calibration_results: Path | None = Path("data/airline/results")
    cron: str = "0 2 * * *"
    deployment: str = "enigma-nightly"


class CheckpointBenchmarkConfig(BaseModel):
    """One entry of ``checkpoint_benchmarks``: the checkpoints of a small language model trained
    on a simulator benchmark's store (``enigma.lm``), scored on that store as a user scores new
    checkpoints every night (the nightly job's path: new agents, the whole store as experience,
    intervals and verdicts calibrated on the benchmark's leave-one-agent-out results), against
    the truth of each checkpoint playing the simulator's customer on-policy.

    Its stages differ from a ``benchmarks`` entry's: there the agents are a store's own and are
    held out one at a time; here they are new, and the store is another benchmark's."""

    model_config = ConfigDict(extra="forbid")

    # a benchmark of ``benchmarks`` with a simulator source: its store is the training data and the
    # logs the checkpoints are scored on, its results the calibration, its simulator the truth
    scored_on: str
    lm: LMConfig
    threads: int = Field(2, ge=1)  # torch threads while training and sampling (fixed: the build's bits depend on it)
    dialogues_per_agent: int = Field(20, ge=0)  # each checkpoint's rated dialogues with the customer, kept to read
    estimators: list[str]  # each must score a new agent from its replies (no own-rollouts estimator)
    note: str | None


@dataclass(frozen=True)
class CheckpointBenchmark:
    """One checkpoint benchmark with its paths resolved: ``<data_dir>/<name>/`` holds
    ``checkpoints`` (one ``hf:`` folder each), ``checkpoints.json``, ``truth.parquet``, ``dialogues`` (a rated store),
    ``targets`` and ``results``; its report goes to ``<report.out_dir>/<name>``."""

    name: str
    config: CheckpointBenchmarkConfig
    data_dir: Path
    report_root: Path
    scored_on: Benchmark

    @property
    def checkpoints(self) -> Path:
        return self.data_dir / "checkpoints"

    @property
    def record(self) -> Path:
        """The checkpoints' mixes, steps and training losses (beside the folder: every entry of a
        registry folder is an agent)."""
        return self.data_dir / "checkpoints.json"

    @property
    def truth(self) -> Path:
        return self.data_dir / "truth.parquet"

    @property
    def dialogues(self) -> Path:
        return self.data_dir / "dialogues"

    @property
    def targets_dir(self) -> Path:
        return self.data_dir / "targets"

    @property
    def results_dir(self) -> Path:
        return self.data_dir / "results"

    @property
    def report_dir(self) -> Path:
        return self.report_root / self.name

    def checkpoint_names(self) -> list[str]:
        return self.config.lm.checkpoint_names()
