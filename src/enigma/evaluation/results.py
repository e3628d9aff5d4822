"""Result files: the one place that turns an ``EstimateResult`` into rows and puts them on disk,
and reads them back.

A results directory holds one file per (estimator, agent), ``<estimator>/<agent>.json``
(``{"fingerprint": ..., "rows": [...]}``, one row per rating, columns ``RESULT_COLUMNS``), and
beside it the learning curve (``.curve.parquet``), the artifacts (``.<name>.pt``, e.g. ENIGMA's
trained heads) and the run's wall time (``.seconds``, a number as text). The JSON is written last and
atomically, so it exists only when everything for it is on disk. A results table may also be a
Parquet or CSV file with the same columns.

The wall time is the one thing two runs of the same inputs never agree on, so it stays out of the
result file: the file is then the same bytes on every machine that computes the same numbers, and
DVC (which ignores ``*.seconds``: .dvcignore) sees a rerun from a fresh clone as unchanged.
``read_results`` puts it back in the ``seconds`` column.
"""

from __future__ import annotations

import json
import math
import os
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from enigma.contracts import Estimator, EstimateResult
from enigma.evaluation.errors import EvaluationError
from enigma.evaluation.heldout import regime_names
from enigma.writes import WriteFailed, naming, write_atomic, write_text

RESULT_COLUMNS = [
    "estimator",
    "agent_id",
    "rating",
    "estimate",
    "unnormalised",
    "ess",
    "interval_low",
    "interval_high",
    "regime",
    "labels",
    "diagnostics",
    "n_experience_dialogues",
    "seconds",
    "error",
]
# learning curves travel in EstimateResult.curve, never inside the diagnostics
CURVE_KEYS = ("learning_curve", "curve", "curves")


def _safe(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def result_path(results_dir: str | Path, estimator: str, agent_id: str) -> Path:
    return Path(results_dir) / _safe(estimator) / f"{_safe(agent_id)}.json"


# the longest name a result file gets beside ``<agent>``: the curve, written as a temporary file
# first (enigma.writes: ``.<name>.tmp<pid>``, a pid of up to 7 digits)
_LONGEST_FILE = ".{}.curve.parquet.tmp4194304"


def result_name_problem(results_dir: str | Path, agent_id: str) -> str | None:
    """Why ``agent_id`` cannot name result files under ``results_dir`` (the longest of them over
    the file system's limit on a file name, in bytes), or None when it can."""
    longest = len(os.fsencode(_LONGEST_FILE.format(_safe(agent_id))))
    where = Path(results_dir)
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        limit = os.pathconf(where, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    if longest <= limit:
        return None
    return (f"the name is too long for its result files ({len(agent_id)} characters, {len(os.fsencode(_safe(agent_id)))} "
            f"bytes quoted; its longest file name would have {longest} bytes, over the {limit} a file name may have here)")


def artifact_path(results_dir: str | Path, estimator: str, agent_id: str, name: str) -> Path:
    """Where an artifact of a result lies (``heads``: ENIGMA's trained zeta/nu heads)."""
    return result_path(results_dir, estimator, agent_id).with_suffix(f".{name}.pt")


def _atomic_write(path: Path, text: str) -> None:
    with naming(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, text)


def jsonable_scalars(d: Mapping[str, Any] | None) -> dict[str, Any]:
    """The JSON-able part of a diagnostics mapping: scalars (non-finite floats as null), nested
    mappings and short lists of scalars."""
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


def _per_rating(values: Mapping[str, Any], rating: str) -> float | None:
    v = values.get(rating)
    return None if v is None else float(v)


def _bound(intervals: Mapping[str, Any], rating: str, side: int) -> float | None:
    got = intervals.get(rating)
    return None if got is None or got[side] is None else float(got[side])


def result_rows(
    result: Any,
    estimator: Estimator,
    agent_id: str,
    ratings: Sequence[str],
    *,
    labels: Mapping[str, str],
    notes: Mapping[str, Any],
    n_experience_dialogues: int,
    seconds: float,
) -> list[dict[str, Any]]:
    """One row per rating from what ``estimator.estimate`` returned. A missing rating or a
    value that is not a number is an error of the estimator (raised); a NaN estimate is a
    rating the estimator could not estimate (e.g. no dialogue of the experience has a value for
    it): its row says so in ``error``."""
    name = estimator.name
    if not isinstance(result, EstimateResult):
        raise EvaluationError(
            f"estimator {name!r} on agent {agent_id!r}: returned {type(result).__name__}, "
            "expected an EstimateResult (enigma.contracts)"
        )
    diagnostics = jsonable_scalars(result.diagnostics)
    diagnostics.update(notes)
    rows = []
    for r in ratings:
        if r not in result.estimates:
            raise EvaluationError(f"estimator {name!r} on agent {agent_id!r}: no estimate for rating {r!r}")
        value = result.estimates[r]
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise EvaluationError(
                f"estimator {name!r} on agent {agent_id!r}: rating {r!r}: estimate {value!r} is not a number"
            ) from None
        rows.append({
            "estimator": name,
            "agent_id": agent_id,
            "rating": r,
            "estimate": v,
            "unnormalised": _per_rating(result.unnormalised, r),
            "ess": _per_rating(result.ess, r),
            "interval_low": _bound(result.intervals, r, 0),
            "interval_high": _bound(result.intervals, r, 1),
            "regime": ",".join(regime_names(estimator)),
            "labels": json.dumps(dict(labels), sort_keys=True),
            "diagnostics": json.dumps(diagnostics, sort_keys=True, default=str),
            "n_experience_dialogues": n_experience_dialogues,
            "seconds": seconds,
            "error": None if math.isfinite(v) else f"{name}: no estimate for rating {r!r} (the estimate is {v})",
        })
    return rows


def timing_path(path: Path) -> Path:
    """The wall-time sidecar of result file ``path``."""
    return path.with_suffix(".seconds")


def write_result(path: Path, fingerprint: str, rows: list[dict[str, Any]], result: EstimateResult | None = None) -> None:
    """The result file of one (estimator, agent) with its curve, artifacts and wall time beside it.
    Each is written whole or not at all (``enigma.writes``); a write that fails (a full disk)
    removes what this call wrote, so no part of the result is left to look finished."""
    with naming(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
    seconds = next((r.get("seconds") for r in rows if r.get("seconds") is not None), None)
    rows = [{**r, "seconds": None} for r in rows]
    timing = timing_path(path)
    written: list[Path] = []
    try:
        if seconds is not None:
            written.append(write_text(timing, repr(float(seconds))))
        else:
            timing.unlink(missing_ok=True)  # a failure leaves no time of an earlier run beside it
        if result is not None:
            estimator, agent_id = rows[0]["estimator"], rows[0]["agent_id"]
            curve = result.curve
            if curve is not None and len(curve):
                curve = curve.copy()
                curve.insert(0, "agent_id", agent_id)
                curve.insert(0, "estimator", estimator)
                written.append(write_atomic(path.with_suffix(".curve.parquet"), lambda fh: curve.to_parquet(fh, index=False)))
            if result.artifacts:
                import torch

                for name, obj in result.artifacts.items():
                    written.append(write_atomic(path.with_suffix(f".{name}.pt"), lambda fh, obj=obj: torch.save(obj, fh)))
        write_text(path, json.dumps({"fingerprint": fingerprint, "rows": rows}, indent=1))
    except WriteFailed:
        for f in written:
            f.unlink(missing_ok=True)
        raise


def saved_experience_digest(path: Path) -> str | None:
    """The digest of the experience a saved result was made on (``fingerprints.store_fingerprint``
    of the store without the held-out agent: the first part of the result's fingerprint); None
    where the file records none (a failure, a fingerprint of another form) or cannot be read."""
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    fingerprint = saved.get("fingerprint") if isinstance(saved, dict) else None
    parts = fingerprint.split("-") if isinstance(fingerprint, str) else []
    return parts[0] if len(parts) == 3 and len(parts[0]) == 16 else None


def read_saved(path: Path, fingerprint: str) -> pd.DataFrame | None:
    """The saved rows of a result file if its fingerprint is ``fingerprint``; else None."""
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None  # a torn or overwritten file (an interrupted run, a stray binary): recompute it
    if not isinstance(saved, dict) or saved.get("fingerprint") != fingerprint or not isinstance(saved.get("rows"), list):
        return None
    return pd.DataFrame(_with_seconds(saved["rows"], path), columns=RESULT_COLUMNS)


def _with_seconds(rows: list[dict[str, Any]], path: Path) -> list[dict[str, Any]]:
    """``rows`` with the wall time of their sidecar (a result file written before the sidecar
    existed keeps its own ``seconds``; a missing or unreadable sidecar leaves it null)."""
    try:
        seconds = float(timing_path(path).read_text())
    except (OSError, ValueError):
        return rows
    return [{**r, "seconds": seconds} if r.get("seconds") is None else r for r in rows]


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
            "unnormalised": None, "ess": None, "interval_low": None, "interval_high": None, "regime": ",".join(regime_names(estimator)),
            "labels": "{}", "diagnostics": "{}", "n_experience_dialogues": None, "seconds": None, "error": message,
        }
        for r in ratings
    ]
    if results_dir is not None:
        write_result(result_path(results_dir, estimator.name, agent_id), "failed", rows)
    return rows


def read_results(path: str | Path) -> pd.DataFrame:
    """A results table: a Parquet/CSV file, or a results directory of per-(estimator, agent)
    JSON files."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*/*.json"))
        if not files:
            raise EvaluationError(f"{path}: no result files (<estimator>/<agent>.json) found")
        rows = []
        for f in files:
            try:
                got = json.loads(f.read_text(encoding="utf-8"))["rows"]
                if not isinstance(got, list) or not all(isinstance(r, dict) for r in got):
                    raise TypeError("'rows' is not a list of objects")
            except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
                raise EvaluationError(f"{f}: not a result file written by the leave-one-agent-out runner ({exc})") from exc
            rows += _with_seconds(got, f)
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
