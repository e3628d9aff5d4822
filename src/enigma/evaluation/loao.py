"""The leave-one-agent-out protocol, the same for every estimator.

For each held-out agent, an estimator gets (1) the experience store WITHOUT any of that agent's
rated dialogues and (2) a ``HeldOutAgent`` carrying only what the estimator's information
regimes allow: its replies at the experience's logged states, its own rollouts, or its own
dialogues with the ratings removed. Where those come from is not this module's business: the
caller passes ``HeldOutSources`` (callables per agent), e.g. the sampling stage for target
actions or the self-play transcripts for rollouts.

Each (estimator, agent) result is written to its own file as soon as it finishes and is skipped
on a rerun when the experience data and the estimator's fingerprint are unchanged, so a long
run can be stopped and resumed. The result is a tidy table: one row per (estimator, agent,
rating) with the estimate and the extras an estimator reports (unnormalised estimate, effective
sample size, scalar diagnostics as JSON); learning curves go to a separate table.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from tqdm.auto import tqdm

from enigma.contracts import Agent, Estimator, HeldOutAgent, Regime
from enigma.evaluation.config import EvaluateConfig
from enigma.evaluation.errors import EvaluationError
from enigma.store import schema as S
from enigma.store.experience import ExperienceStore

RESULT_COLUMNS = [
    "estimator",
    "agent_id",
    "rating",
    "estimate",
    "unnormalised",
    "ess",
    "regime",
    "labels",
    "diagnostics",
    "n_experience_dialogues",
    "seconds",
    "error",
]
# Schema metadata key of the sampling stage's approximation label (enigma.sampling.sampler).
APPROXIMATION_KEY = b"enigma.sampling.approximation"
CURVE_KEYS = ("learning_curve", "curve", "curves")


@dataclass
class HeldOutSources:
    """Where the protocol gets what an estimator may know about the held-out agent.

    - ``target_actions(agent_id, experience)``: the agent's replies at the experience's logged
      states (columns dialog_id, turn_index, sample_index, text); rows at states outside the
      experience are dropped by the runner (and counted), so the held-out agent's own rated
      dialogues never leak in through their states.
    - ``rollouts(agent_id)``: its self-play or simulated-user dialogues (ratings are removed).
    - ``unrated_dialogues(agent_id)``: its own dialogues; ratings are removed by the runner.
      ``own_dialogues_unrated(full_store)`` builds this from the store.
    - ``agent(agent_id)``: a runnable agent (given to own-rollout estimators).
    - ``labels``: per agent (callable) or for all agents (dict). Keys that name a regime
      (e.g. ``"replies-at-logged-states"``) are attached only for estimators that use it.
    """

    target_actions: Callable[[str, ExperienceStore], pa.Table] | None = None
    rollouts: Callable[[str], ExperienceStore] | None = None
    unrated_dialogues: Callable[[str], ExperienceStore] | None = None
    agent: Callable[[str], Agent] | None = None
    labels: Callable[[str], Mapping[str, str]] | Mapping[str, str] | None = None


def strip_ratings(store: ExperienceStore) -> ExperienceStore:
    """The same dialogues with every rating, raw rating and the free-form ``meta`` nulled
    (meta may carry rater answers; an unrated view must not)."""
    d = store.dialogues
    for i, name in enumerate(d.schema.names):
        if name.startswith(S.RATING_PREFIX) or name.startswith(S.RAW_PREFIX) or name == "meta":
            d = d.set_column(i, d.schema.field(i), pa.nulls(d.num_rows, d.schema.field(i).type))
    return ExperienceStore(d, store.turns, None)


def own_dialogues_unrated(full_store: ExperienceStore) -> Callable[[str], ExperienceStore]:
    def unrated(agent_id: str) -> ExperienceStore:
        return full_store.filter_agents(keep={agent_id})

    return unrated


def regime_names(estimator: Estimator) -> list[str]:
    return sorted(Regime(r).value for r in estimator.regimes)


def store_fingerprint(store: ExperienceStore) -> str:
    """Changes when the set of dialogues, their agents or their ratings change."""
    cols = ["dialog_id", "agent_id"] + [S.RATING_PREFIX + r for r in store.rating_names]
    t = store.dialogues.select(cols).sort_by([("dialog_id", "ascending")])
    h = hashlib.sha256()
    for c in cols:
        h.update(c.encode())
        h.update(json.dumps(t.column(c).to_pylist(), default=str).encode())
    h.update(str(store.turns.num_rows).encode())
    return h.hexdigest()[:16]


def _table_digest(table: pa.Table, columns: Sequence[str]) -> str:
    cols = [c for c in columns if c in table.schema.names]
    if not cols or table.num_rows == 0:
        return f"empty:{table.num_rows}"
    frame = table.select(cols).to_pandas()
    rows = pd.util.hash_pandas_object(frame, index=False).to_numpy()
    return hashlib.sha256(rows.tobytes() + ",".join(cols).encode()).hexdigest()[:16]


def target_fingerprint(target: HeldOutAgent) -> str:
    """Changes when what the estimator is given about the agent changes: its replies at the
    logged states, its rollouts, its unrated dialogues (texts included), or the labels."""
    parts = [json.dumps(target.labels, sort_keys=True)]
    if target.target_actions is not None:
        parts.append(_table_digest(target.target_actions, ["dialog_id", "turn_index", "sample_index", "text", "error"]))
    for store in (target.rollouts, target.unrated_dialogues):
        if store is not None:
            parts.append(_table_digest(store.dialogues, ["dialog_id", "agent_id"]))
            parts.append(_table_digest(store.turns, ["dialog_id", "turn_index", "role", "text"]))
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def estimator_fingerprint(estimator: Estimator) -> str:
    """An estimator may expose ``fingerprint`` (str) or a pydantic ``config``; a change in
    either invalidates its saved results."""
    fp = getattr(estimator, "fingerprint", None)
    if callable(fp):
        fp = fp()
    if fp is None:
        cfg = getattr(estimator, "config", None)
        if cfg is not None and hasattr(cfg, "model_dump_json"):
            fp = cfg.model_dump_json()
        elif cfg is not None:
            fp = repr(cfg)
    return hashlib.sha256(f"{estimator.name}|{regime_names(estimator)}|{fp}".encode()).hexdigest()[:16]


def held_out_view(
    store: ExperienceStore, agent_id: str, estimator: Estimator, sources: HeldOutSources
) -> tuple[ExperienceStore, HeldOutAgent, dict[str, Any]]:
    """The experience and the held-out agent's information for one (estimator, agent)."""
    if agent_id not in store.agents():
        raise EvaluationError(f"held-out agent {agent_id!r} has no dialogues in the store")
    experience = store.without_agent(agent_id)
    regimes = set(Regime(r) for r in estimator.regimes)
    notes: dict[str, Any] = {}
    target = HeldOutAgent(agent_id=agent_id)
    sampled_labels: dict[str, str] = {}

    if Regime.REPLIES_AT_LOGGED_STATES in regimes:
        if sources.target_actions is None:
            raise EvaluationError(
                f"estimator {estimator.name!r} needs the held-out agent's replies at logged states, "
                "but no target_actions source was given"
            )
        table = sources.target_actions(agent_id, experience)
        if not isinstance(table, pa.Table) or "dialog_id" not in table.schema.names:
            raise EvaluationError(
                f"target actions for agent {agent_id!r}: expected a pyarrow Table with a 'dialog_id' column"
            )
        keep = pc.is_in(table.column("dialog_id"), experience.dialogues.column("dialog_id"))
        kept = table.filter(keep)
        notes["target_actions_outside_experience_dropped"] = table.num_rows - kept.num_rows
        if "error" in kept.schema.names:
            notes["target_actions_failed"] = kept.num_rows - kept.column("error").null_count
        target.target_actions = kept
        # The sampling stage marks replies from a stand-in (e.g. retrieval over the agent's own
        # transcripts) as an approximation; the report must show that beside the numbers.
        meta = table.schema.metadata or {}
        approx = meta.get(APPROXIMATION_KEY)
        if approx:
            sampled_labels[Regime.REPLIES_AT_LOGGED_STATES.value] = "target actions: " + approx.decode()
    if Regime.OWN_ROLLOUTS in regimes:
        if sources.rollouts is None and sources.agent is None:
            raise EvaluationError(
                f"estimator {estimator.name!r} needs the held-out agent's rollouts or a runnable agent, "
                "but neither source was given"
            )
        if sources.rollouts is not None:
            target.rollouts = strip_ratings(sources.rollouts(agent_id))
        if sources.agent is not None:
            target.agent = sources.agent(agent_id)
    if Regime.OWN_UNRATED_DIALOGUES in regimes:
        if sources.unrated_dialogues is None:
            raise EvaluationError(
                f"estimator {estimator.name!r} needs the held-out agent's unrated dialogues, "
                "but no unrated_dialogues source was given"
            )
        target.unrated_dialogues = strip_ratings(sources.unrated_dialogues(agent_id))

    labels = dict(sampled_labels)
    labels.update(sources.labels(agent_id) if callable(sources.labels) else (sources.labels or {}))
    regime_values = {r.value for r in Regime}
    used = {r.value for r in regimes}
    target.labels = {k: str(v) for k, v in dict(labels).items() if k not in regime_values or k in used}
    return experience, target, notes


# ---- estimator output -----------------------------------------------------------------------
def _get(result: Any, key: str) -> Any:
    if isinstance(result, Mapping):
        return result.get(key)
    return getattr(result, key, None)


def _per_rating(value: Any, rating: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        v = value.get(rating)
        return None if v is None else float(v)
    return float(value)


def jsonable_scalars(d: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in (d or {}).items():
        if k in CURVE_KEYS:
            continue
        if isinstance(v, (bool, int, str)) or v is None:
            out[k] = v
        elif isinstance(v, float):
            out[k] = v if math.isfinite(v) else None
        elif hasattr(v, "item") and getattr(v, "ndim", 1) == 0:
            out[k] = v.item()
        elif isinstance(v, Mapping):
            out[k] = jsonable_scalars(v)
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (int, float, str, bool)) for x in v) and len(v) <= 64:
            out[k] = list(v)
    return out


def _curve_frame(curve: Any) -> pd.DataFrame | None:
    """A learning curve as one table. Accepts a table, a list of row dicts, or a mapping of
    run name -> rows (one DICE run for all ratings, "all", or one per rating); the run name
    becomes a ``run`` column."""
    if curve is None:
        return None
    if isinstance(curve, pd.DataFrame):
        return curve.copy()
    if isinstance(curve, pa.Table):
        return curve.to_pandas()
    if isinstance(curve, Mapping):
        frames = [pd.DataFrame(list(rows)).assign(run=str(run)) for run, rows in curve.items() if len(rows)]
        return pd.concat(frames, ignore_index=True) if frames else None
    return pd.DataFrame(list(curve))


def normalise_result(
    result: Any, ratings: Sequence[str], estimator: str, agent_id: str
) -> tuple[dict[str, float], dict[str, Any]]:
    """Accept what estimators return: a plain ``{rating: value}`` mapping (the contract), or a
    richer object/mapping with ``estimates`` (values either numbers or per-rating mappings
    with ``estimate`` and optionally ``unnormalised``/``ess``) and optional ``unnormalised``,
    ``ess``, ``diagnostics`` and ``learning_curve``/``curves``."""
    rich = _get(result, "estimates")
    estimates = rich if isinstance(rich, Mapping) else result
    if not isinstance(estimates, Mapping):
        raise EvaluationError(
            f"estimator {estimator!r} on agent {agent_id!r}: returned {type(result).__name__}, "
            "expected a mapping of rating -> value (or an object with .estimates)"
        )
    out: dict[str, float] = {}
    nested_unnorm: dict[str, Any] = {}
    nested_ess: dict[str, Any] = {}
    for r in ratings:
        if r not in estimates:
            raise EvaluationError(f"estimator {estimator!r} on agent {agent_id!r}: no estimate for rating {r!r}")
        value = estimates[r]
        if isinstance(value, Mapping):
            nested_unnorm[r] = value.get("unnormalised")
            nested_ess[r] = value.get("ess")
            value = value.get("estimate")
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise EvaluationError(
                f"estimator {estimator!r} on agent {agent_id!r}: rating {r!r}: estimate {value!r} is not a number"
            ) from None
        if not math.isfinite(v):
            raise EvaluationError(f"estimator {estimator!r} on agent {agent_id!r}: rating {r!r}: estimate is {v}")
        out[r] = v
    extras: dict[str, Any] = {}
    if rich is not None:
        diagnostics = _get(result, "diagnostics")
        if diagnostics is not None and not isinstance(diagnostics, Mapping):
            diagnostics = getattr(diagnostics, "__dict__", None) or {}
        curve = _get(result, "learning_curve")
        if curve is None:
            curve = _get(result, "curves")
        if curve is None and isinstance(diagnostics, Mapping):
            curve = next((diagnostics[k] for k in CURVE_KEYS if k in diagnostics), None)
        extras = {
            "unnormalised": _get(result, "unnormalised") or (nested_unnorm or None),
            "ess": _get(result, "ess") or (nested_ess or None),
            "diagnostics": jsonable_scalars(diagnostics),
            "curve": _curve_frame(curve),
        }
    return out, extras


# ---- running --------------------------------------------------------------------------------
def _safe(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def result_path(results_dir: Path, estimator: str, agent_id: str) -> Path:
    return Path(results_dir) / _safe(estimator) / f"{_safe(agent_id)}.json"


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def record_failure(
    results_dir: str | Path | None, estimator: Estimator, agent_id: str, ratings: Sequence[str], exc: BaseException
) -> list[dict[str, Any]]:
    """The rows of a failed (estimator, agent) run, with ``error`` set. With a results
    directory they are written as its result file, so the report lists the failure (``errors``
    in summary.json); that file's fingerprint never matches, so the next run tries again."""
    message = f"{type(exc).__name__}: {exc}"[:2000]
    rows = [
        {
            "estimator": estimator.name, "agent_id": agent_id, "rating": r, "estimate": float("nan"),
            "unnormalised": None, "ess": None, "regime": ",".join(regime_names(estimator)),
            "labels": json.dumps(dict(getattr(estimator, "labels", None) or {})), "diagnostics": "{}",
            "n_experience_dialogues": None, "seconds": None, "error": message,
        }
        for r in ratings
    ]
    if results_dir is not None:
        _atomic_write(result_path(Path(results_dir), estimator.name, agent_id),
                      json.dumps({"fingerprint": "failed", "rows": rows}, indent=1))
    return rows


def evaluate_one(
    store: ExperienceStore,
    estimator: Estimator,
    agent_id: str,
    sources: HeldOutSources,
    results_dir: str | Path | None = None,
    resume: bool = True,
) -> tuple[pd.DataFrame, bool]:
    """Score one held-out agent with one estimator. Returns its result rows and whether they
    came from a saved result (resume) rather than a fresh run."""
    # The view comes first: what the estimator is given about the agent (its sampled replies,
    # its rollouts) is part of what a saved result depends on.
    experience, target, notes = held_out_view(store, agent_id, estimator, sources)
    fingerprint = "-".join(
        [store_fingerprint(experience), estimator_fingerprint(estimator), target_fingerprint(target)]
    )
    path = result_path(Path(results_dir), estimator.name, agent_id) if results_dir is not None else None
    if path is not None and resume and path.is_file():
        try:
            saved = json.loads(path.read_text())
        except json.JSONDecodeError:
            saved = {}  # a torn file from an interrupted run: recompute it
        if saved.get("fingerprint") == fingerprint:
            return pd.DataFrame(saved["rows"], columns=RESULT_COLUMNS), True

    start = time.perf_counter()
    ratings = experience.rating_names
    # An estimator with ``estimate_full`` (ENIGMA) returns its extras there: unnormalised
    # estimates, effective sample size, diagnostics and learning curves.
    full = getattr(estimator, "estimate_full", None)
    raw = full(experience, target) if callable(full) else estimator.estimate(experience, target)
    estimates, extras = normalise_result(raw, ratings, estimator.name, agent_id)
    seconds = time.perf_counter() - start

    diagnostics = dict(extras.get("diagnostics") or {})
    diagnostics.update(notes)
    labels = dict(getattr(estimator, "labels", None) or {})
    labels.update(target.labels)
    rows = [
        {
            "estimator": estimator.name,
            "agent_id": agent_id,
            "rating": r,
            "estimate": estimates[r],
            "unnormalised": _per_rating(extras.get("unnormalised"), r),
            "ess": _per_rating(extras.get("ess"), r),
            "regime": ",".join(regime_names(estimator)),
            "labels": json.dumps(labels, sort_keys=True),
            "diagnostics": json.dumps(diagnostics, sort_keys=True, default=str),
            "n_experience_dialogues": experience.dialogues.num_rows,
            "seconds": seconds,
            "error": None,
        }
        for r in ratings
    ]
    if path is not None:
        curve = extras.get("curve")
        if curve is not None and len(curve):
            curve = curve.copy()
            curve.insert(0, "agent_id", agent_id)
            curve.insert(0, "estimator", estimator.name)
            curve_path = path.with_suffix(".curve.parquet")
            curve_path.parent.mkdir(parents=True, exist_ok=True)
            curve.to_parquet(curve_path, index=False)
        # Written last, so a result file exists only when everything for it is on disk.
        _atomic_write(path, json.dumps({"fingerprint": fingerprint, "rows": rows}, indent=1))
    return pd.DataFrame(rows, columns=RESULT_COLUMNS), False


def run_loao(
    store: ExperienceStore,
    estimators: Iterable[Estimator],
    sources: HeldOutSources | None = None,
    *,
    agents: Sequence[str] | None = None,
    results_dir: str | Path | None = None,
    resume: bool = True,
    errors: Literal["raise", "record"] = "raise",
    progress: bool = True,
    config: EvaluateConfig | None = None,
) -> pd.DataFrame:
    """Every estimator on every held-out agent. With ``errors="record"`` an estimator that
    fails on an agent gives rows with ``error`` set (and is retried on the next run) instead
    of stopping the whole run. ``config`` (the ``evaluate`` section of params.yaml) supplies
    ``agents``, ``results_dir`` and ``resume`` where those arguments are not given."""
    if config is not None:
        agents = agents if agents is not None else config.agents
        results_dir = results_dir if results_dir is not None else config.results_dir
        resume = resume and config.resume
    sources = sources or HeldOutSources()
    estimators = list(estimators)
    names = [e.name for e in estimators]
    if len(set(names)) != len(names):
        raise EvaluationError(f"estimator names must be unique, got {names}")
    agent_ids = list(agents) if agents is not None else store.agents()
    unknown = sorted(set(agent_ids) - set(store.agents()))
    if unknown:
        raise EvaluationError(f"held-out agent(s) {unknown} have no dialogues in the store")
    records: list[dict[str, Any]] = []
    pairs = [(e, a) for e in estimators for a in agent_ids]
    bar = tqdm(pairs, desc="leave-one-agent-out", unit="run", disable=not progress)
    n_resumed = 0
    for est, agent_id in bar:
        bar.set_postfix_str(f"{est.name} / {agent_id}", refresh=False)
        try:
            rows, resumed = evaluate_one(store, est, agent_id, sources, results_dir, resume)
            n_resumed += resumed
        except Exception as exc:
            if errors == "raise":
                raise
            # in memory only: the library runner leaves nothing on disk for a failure (the pipeline
            # stage writes it, so that its report lists it)
            rows = pd.DataFrame(record_failure(None, est, agent_id, store.rating_names, exc), columns=RESULT_COLUMNS)
        records += rows.to_dict(orient="records")
    bar.close()
    if progress and n_resumed:
        tqdm.write(f"leave-one-agent-out: {n_resumed} of {len(pairs)} results reused from {results_dir}")
    return pd.DataFrame(records, columns=RESULT_COLUMNS)


def read_results(path: str | Path) -> pd.DataFrame:
    """A results table: a Parquet/CSV file, or a results directory of per-(estimator, agent)
    JSON files as ``run_loao`` writes them."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*/*.json"))
        if not files:
            raise EvaluationError(f"{path}: no result files (<estimator>/<agent>.json) found")
        rows = []
        for f in files:
            try:
                got = json.loads(f.read_text())["rows"]
                if not isinstance(got, list) or not all(isinstance(r, dict) for r in got):
                    raise TypeError("'rows' is not a list of objects")
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise EvaluationError(f"{f}: not a result file written by the leave-one-agent-out runner ({exc})") from exc
            rows += got
        # one frame from every row (not a concat of per-file frames, whose all-null columns
        # pandas is deprecating to type differently)
        return check_results(pd.DataFrame(rows, columns=RESULT_COLUMNS), str(path))
    if not path.is_file():
        raise EvaluationError(f"{path}: results file not found")
    try:
        df = pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
    except Exception as exc:
        raise EvaluationError(f"{path}: not a readable results table ({exc})") from exc
    return check_results(df, str(path))


def read_curves(results_dir: str | Path | Sequence[str | Path]) -> pd.DataFrame | None:
    """The learning curves of a results directory, or of several (e.g. a benchmark's main and
    full runs) in one table; None when there are none."""
    dirs = [results_dir] if isinstance(results_dir, (str, Path)) else list(results_dir)
    files = [f for d in dirs for f in sorted(Path(d).glob("*/*.curve.parquet"))]
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True) if files else None


def check_results(df: pd.DataFrame, source: str = "results") -> pd.DataFrame:
    """Require estimator, agent_id, rating, estimate; fill the optional columns."""
    missing = [c for c in ("estimator", "agent_id", "rating", "estimate") if c not in df.columns]
    if missing:
        raise EvaluationError(f"{source}: missing column(s) {missing}")
    out = df.copy()
    for c in RESULT_COLUMNS:
        if c not in out.columns:
            out[c] = None
    for i, row in enumerate(out.itertuples(index=False), start=1):
        for field in ("estimator", "agent_id", "rating"):
            v = getattr(row, field)
            if not isinstance(v, str) or not v:
                raise EvaluationError(f"{source}: row {i}: field '{field}' must be a non-empty string, got {v!r}")
        est = row.estimate
        if row.error is None or (isinstance(row.error, float) and math.isnan(row.error)):
            try:
                ok = math.isfinite(float(est))
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise EvaluationError(
                    f"{source}: row {i} ({row.estimator}, {row.agent_id}, {row.rating}): field 'estimate' "
                    f"is {est!r} but no error is recorded"
                )
    dup = out.duplicated(["estimator", "agent_id", "rating"], keep=False)
    if dup.any():
        i = int(dup.to_numpy().nonzero()[0][0]) + 1
        raise EvaluationError(f"{source}: row {i}: duplicate (estimator, agent_id, rating)")
    out["estimate"] = pd.to_numeric(out["estimate"], errors="coerce")
    return out[RESULT_COLUMNS].reset_index(drop=True)
