"""``params.yaml`` as one typed object: ``Params``, loaded once at each entry point (a CLI command,
a DVC stage, a flow) and handed down as config objects; nothing below an entry point reads the
file again.

Sections: ``shared`` (what several stages use: the sentence encoder, the embedding cache, the
seed), one section per stage (``ingest``, ``simulate``, ``sample``, ``serve``, ``encode``,
``comparators``, ``report``, ``tracking``), ``estimators`` (ENIGMA's named variants),
``pipeline`` (the task runner), ``benchmarks`` (one entry per benchmark; dvc.yaml stamps its
stages out from it) and ``nightly``. A ``shared`` value fills every section that uses it unless
that section sets its own. Progress bars are not parameters: they are options of the commands.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

# Only the sections' config modules: nothing that runs a stage (tests/test_layers.py checks it)
from enigma.agents.config import ServeSettings, unsourced_stand_in
from enigma.comparators.config import ComparatorsConfig
from enigma.encoders.config import STAND_IN_REFUSAL, EncodeConfig
from enigma.evaluation.config import ReportConfig
from enigma.ope.config import ENIGMA_DEFAULT
from enigma.pipeline.config import (Benchmark, BenchmarkConfig, CheckpointBenchmark, CheckpointBenchmarkConfig, NightlyConfig,
                                    PipelineConfig)
from enigma.redaction import redact_userinfo
from enigma.sampling.config import SampleConfig
from enigma.sim.config import SimulateConfig
from enigma.store.config import IngestConfig
from enigma.tracking.config import TrackingConfig

DEFAULT_PARAMS = Path("params.yaml")


class ParamsError(Exception):
    """params.yaml is missing, malformed or has a bad value; the message names the file and the
    section."""


class SharedConfig(BaseModel):
    """Settings several stages use, set once."""

    model_config = ConfigDict(extra="forbid")

    # The sentence encoder of ENIGMA's frozen features, the comparators, the learned customer and
    # the transcript stand-ins (a packaged name or a local Hugging Face directory).
    embedding_model: str = "minilm"
    # Where sentence vectors are cached, keyed by (model, text): no text is encoded twice. None:
    # each user's own default (the encode stage's is ~/.cache/enigma/embeddings).
    embedding_cache: str | None = None
    seed: int = 0  # every stage's seed unless its section sets its own


class EstimatorEntry(BaseModel):
    """One named ENIGMA estimator of the ``estimators`` section (the comparators are named by
    the registry, ``enigma.estimators``, and set in ``comparators``)."""

    model_config = ConfigDict(extra="forbid")

    # Another entry whose ``dice`` settings this one starts from, key by key (a variant stays on
    # the same features as its base, so a report compares them paired).
    base: str | None = None
    # The DICE settings (enigma.ope.config.DiceConfig): ``preset`` plus overrides.
    dice: dict[str, Any] = {}
    # The encoder ablation: the frozen encoder's model with random weights (seeded by dice.seed).
    random_encoder: bool = False
    # What the entry is, in a few words: the reports show it in their labels column, so a reader
    # of a full report knows a studied setting from the default.
    note: str | None = None


def _fill(section: dict, key: str, value: Any) -> None:
    if value is not None:
        section.setdefault(key, value)


def _sub(data: dict, *keys: str) -> dict:
    """``data[k1][k2]...`` as a dict, created where missing (so a shared value can go in); a
    value that is not a mapping is left to the section's own validation to report."""
    for k in keys:
        if data.get(k) is None:
            data[k] = {}
        if not isinstance(data[k], dict):
            return {}
        data = data[k]
    return data


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    shared: SharedConfig = SharedConfig()
    ingest: IngestConfig = IngestConfig()
    simulate: SimulateConfig = SimulateConfig()
    sample: SampleConfig = SampleConfig()
    serve: ServeSettings = ServeSettings()
    encode: EncodeConfig = EncodeConfig()
    estimators: dict[str, EstimatorEntry] = {}  # without the section: ENIGMA as params.yaml runs it (enigma.ope.config.ENIGMA_DEFAULT)
    comparators: ComparatorsConfig = ComparatorsConfig()
    report: ReportConfig = ReportConfig()
    tracking: TrackingConfig = TrackingConfig()
    pipeline: PipelineConfig = PipelineConfig()
    benchmarks: dict[str, BenchmarkConfig] = {}
    checkpoint_benchmarks: dict[str, CheckpointBenchmarkConfig] = {}
    nightly: NightlyConfig = NightlyConfig()

    @model_validator(mode="before")
    @classmethod
    def _shared_fills_the_sections(cls, data: Any) -> Any:
        """Each ``shared`` value goes into every section that uses it and does not set its own."""
        if not isinstance(data, dict):
            return data
        data = copy.deepcopy(data)
        try:
            shared = SharedConfig.model_validate(data.get("shared") or {})
        except ValidationError:
            return data  # reported by the field's own validation, naming the section
        model, cache, seed = shared.embedding_model, shared.embedding_cache, shared.seed
        for section in ("simulate", "sample", "report"):
            _fill(_sub(data, section), "seed", seed)
        encode = _sub(data, "encode")
        _fill(encode, "model", model)
        _fill(_sub(encode, "cache"), "cache_dir", cache)
        comparators = _sub(data, "comparators")
        _fill(comparators, "embedding_model", model)
        _fill(comparators, "cache_dir", cache)
        for part in ("spe", "overlap", "perplexity", "adem", "dynaeval", "critic"):
            _fill(_sub(comparators, part), "seed", seed)
        transcripts = _sub(data, "sample", "agents", "transcripts")
        _fill(transcripts, "encoder", model)
        _fill(transcripts, "embed_cache_dir", cache)
        if data.get("estimators") is None:
            # a params file without the section, or a user outside the repository: the package's own
            # ENIGMA (ENIGMA_DEFAULT, the one params.yaml runs), not DiceConfig's field defaults
            data["estimators"] = {"enigma": {"dice": copy.deepcopy(ENIGMA_DEFAULT)}}
        estimators = data["estimators"] if isinstance(data["estimators"], dict) else {}
        for entry in estimators.values():
            if isinstance(entry, dict) and entry.get("base") is None:  # a variant inherits them from its base
                dice = _sub(entry, "dice")
                _fill(dice, "seed", seed)
                _fill(dice, "encoder_model", model)
        for entry in (data.get("benchmarks") or {}).values():
            customer = ((entry or {}).get("rollouts") or {}).get("learned_customer") if isinstance(entry, dict) else None
            if isinstance(customer, dict):
                _fill(customer, "seed", seed)
                _fill(customer, "embedding_model", model)
                _fill(customer, "cache_dir", cache)
        return data

    @model_validator(mode="after")
    def _check_estimators(self) -> "Params":
        for name, entry in self.estimators.items():
            seen = [name]
            while entry.base is not None:
                if entry.base not in self.estimators:
                    raise ValueError(f"estimators.{seen[-1]}: base {entry.base!r} is not an entry of estimators")
                if entry.base in seen:
                    raise ValueError(f"estimators.{name}: its bases go round in a circle ({' -> '.join(seen + [entry.base])})")
                seen.append(entry.base)
                entry = self.estimators[entry.base]
        return self

    @model_validator(mode="after")
    def _check_knowledge_with_stand_ins(self) -> "Params":
        # whether a stand-in records its sources is the sample section's, so the check is here, across
        # the sections; the rule itself is the agent settings' (enigma.agents.config)
        for name, b in self.benchmarks.items():
            if b.knowledge is not None and unsourced_stand_in(b.agent_spec, self.sample.agents):
                raise ValueError(f"benchmarks.{name}: knowledge {b.knowledge!r} with agent_spec {b.agent_spec!r}: "
                                 f"{STAND_IN_REFUSAL}; set knowledge: null, or sample.agents.transcripts.sources: true")
        return self

    @model_validator(mode="after")
    def _check_checkpoint_benchmarks(self) -> "Params":
        for name, c in self.checkpoint_benchmarks.items():
            if name in self.benchmarks:
                raise ValueError(f"checkpoint_benchmarks.{name}: benchmarks has an entry of that name (they share data/<name>)")
            b = self.benchmarks.get(c.scored_on)
            if b is None:
                raise ValueError(f"checkpoint_benchmarks.{name}: scored_on {c.scored_on!r} is not an entry of benchmarks")
            if b.source.simulate is None:
                raise ValueError(f"checkpoint_benchmarks.{name}: scored_on {c.scored_on!r} is not a simulator benchmark "
                                 "(the checkpoints' truth is their play with its simulated customer)")
        return self

    def checkpoint_benchmark(self, name: str) -> CheckpointBenchmark:
        """Entry ``name`` of ``checkpoint_benchmarks`` with its paths."""
        if name not in self.checkpoint_benchmarks:
            raise ParamsError(f"checkpoint_benchmarks has no benchmark {name!r}; known: {sorted(self.checkpoint_benchmarks)}")
        c = self.checkpoint_benchmarks[name]
        return CheckpointBenchmark(name, c, self.pipeline.data_dir / name, self.report.out_dir, self.benchmark(c.scored_on))

    def benchmark(self, name: str) -> Benchmark:
        """Entry ``name`` of ``benchmarks`` with its paths."""
        if name not in self.benchmarks:
            raise ParamsError(f"benchmarks has no benchmark {name!r}; known: {sorted(self.benchmarks)}")
        return Benchmark(name, self.benchmarks[name], self.pipeline.data_dir / name, self.report.out_dir,
                         self.pipeline.full_results)

    @classmethod
    def load(cls, path: str | Path = DEFAULT_PARAMS, missing: Literal["error", "defaults"] = "error") -> "Params":
        """The parameters in ``path``; a missing file is an error, or (``missing="defaults"``,
        for commands that work outside a project) the built-in defaults."""
        path = Path(path)
        if not path.is_file():
            if missing == "defaults":
                return cls()
            raise ParamsError(f"{path}: parameters file not found")
        return cls.from_dict(load_yaml(path), path)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | Path = "params") -> "Params":
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            # a check across sections has no location: its message starts with the section's key
            named = re.match(r"Value error, (\w+)[.:]", first["msg"])
            section = first["loc"][0] if first["loc"] else named.group(1) if named else "?"
            # from None: pydantic's own error, chained, would print the values in a traceback
            raise ParamsError(f"{source}: section '{section}': {describe_errors(exc)}") from None

    def with_overrides(self, section: str, **values: Any) -> BaseModel:
        """Section ``section`` with the given values (None: left as it is) put in and checked, as
        a command's options override params.yaml."""
        current = getattr(self, section)
        update = {k: v for k, v in values.items() if v is not None}
        try:
            return type(current).model_validate({**current.model_dump(), **update})
        except ValidationError as exc:
            raise ParamsError(redact_userinfo(f"section '{section}' with {update}: {describe_errors(exc)}")) from None


# A field whose name says it holds a secret: its value is never quoted in an error.
SECRET_NAME = re.compile(r"(?i)(key|secret|token|passw|pwd|credential|auth|cookie|bearer)")


def describe_errors(exc: ValidationError) -> str:
    """pydantic's report of ``exc`` (each error's location, message, type) quoting a value only
    where it cannot be a secret pasted into the file (issue 73, item 9): never the value of an
    unknown key (``sample.agents.openai.api_key: sk-...``, where only ``api_key_env`` exists), of a
    field whose name says secret (key, token, password...), or a mapping or list (it holds other
    keys' values); a string quoted has the credentials of any URL in it hidden, and so has every
    message (a check's own message may quote a spec)."""
    errors = exc.errors(include_url=False)
    lines = [f"{len(errors)} validation error{'s' if len(errors) != 1 else ''} for {exc.title}"]
    for e in errors:
        loc = ".".join(str(part) for part in e["loc"])
        value, kind = e.get("input"), e["type"]
        secret = kind == "extra_forbidden" or any(SECRET_NAME.search(str(part)) for part in e["loc"])
        facts = [f"type={kind}"]
        if not secret and (value is None or isinstance(value, (str, int, float, bool))):
            shown = repr(value)
            facts.append(f"input_value={shown if len(shown) <= 80 else shown[:77] + '...'}")
        facts.append(f"input_type={type(value).__name__}")
        if loc:
            lines.append(loc)
        lines.append(f"  {e['msg']} [{', '.join(facts)}]")
    return redact_userinfo("\n".join(lines))


def load_yaml(path: str | Path, _chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The mapping in a YAML file, with errors that name the file. A top-level ``extends: <path>``
    (relative to the file) makes the file the extended file's mapping with this one's merged in
    (``merge``): studies/params.yaml is the product's params.yaml plus the lab's entries, so the
    rows it shares with the product resolve exactly as the product runs them."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: parameters file not found")
    try:
        text = path.read_text()
        _check_expansion(yaml.compose(text, Loader=yaml.SafeLoader), path)
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ParamsError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: expected a mapping of sections at the top level")
    if "extends" not in data:
        return data
    base = data.pop("extends")
    if not isinstance(base, str) or not base:
        raise ParamsError(f"{path}: extends: expected the path of another parameters file, got {base!r}")
    base_path = path.parent / base
    chain = _chain + (path.resolve(),)
    if base_path.resolve() in chain:
        raise ParamsError(f"{path}: extends: {base} goes round in a circle "
                          f"({' -> '.join(str(p) for p in chain + (base_path.resolve(),))})")
    if not base_path.is_file():
        raise ParamsError(f"{path}: extends: {base_path}: parameters file not found")
    return merge(load_yaml(base_path, chain), data)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` merged in: mappings key by key, anything else (a list, a scalar,
    null) replaced whole, so a list of estimators is the file's own, never a concatenation."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# Aliases may repeat a block (params.yaml repeats a source and a list of estimators), but nested
# aliases multiply: 400 bytes of them expand to hundreds of millions of nodes, which the
# validation would walk for minutes. params.yaml itself expands to under 2,000.
MAX_EXPANDED_NODES = 100_000


def _check_expansion(root: yaml.Node | None, path: Path) -> None:
    """Refuse a document whose aliases expand past ``MAX_EXPANDED_NODES`` or refer to
    themselves, counting each distinct node once (so the count costs what the file's size does)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise ParamsError(f"{path}: an alias refers to a block that contains it (line {node.start_mark.line + 1})")
        open_nodes.add(key)
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            children = []
        total = 1
        for child in children:
            total += size(child)
            if total > MAX_EXPANDED_NODES:
                raise ParamsError(f"{path}: its aliases expand to more than {MAX_EXPANDED_NODES:,} values "
                                  f"(near line {child.start_mark.line + 1}); a parameters file repeats a block a few times at most")
        open_nodes.discard(key)
        sizes[key] = total
        return total

    if root is not None:
        size(root)
