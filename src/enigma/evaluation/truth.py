"""The true per-agent values that estimates are compared with.

Two sources: the simulator's exact values (``truth.parquet``: agent_id, rating, value,
stderr) or, for human data, each agent's own mean normalised rating over all its rated
dialogues in the full store (that agent's dialogues are never in its own experience data, so
this is a fair target). Both give the same tidy table: agent_id, rating, value, stderr, n.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from enigma.evaluation.errors import EvaluationError
from enigma.store import schema as S
from enigma.store.experience import ExperienceStore

TRUTH_COLUMNS = ["agent_id", "rating", "value", "stderr", "n"]


def read_truth(path: str | Path) -> pd.DataFrame:
    """Read a simulator ``truth.parquet`` (or CSV with the same columns), checked row by row."""
    path = Path(path)
    if not path.is_file():
        raise EvaluationError(f"{path}: truth file not found")
    try:
        df = pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
    except Exception as exc:  # pyarrow/pandas raise several types for unreadable files
        raise EvaluationError(f"{path}: not a readable truth table ({exc})") from exc
    return check_truth(df, source=str(path))


def check_truth(df: pd.DataFrame, source: str = "truth") -> pd.DataFrame:
    missing = [c for c in ("agent_id", "rating", "value") if c not in df.columns]
    if missing:
        raise EvaluationError(f"{source}: missing column(s) {missing}; expected agent_id, rating, value[, stderr]")
    out = df.copy()
    if "stderr" not in out.columns:
        out["stderr"] = np.nan
    if "n" not in out.columns:
        out["n"] = np.nan
    for i, row in enumerate(out.itertuples(index=False), start=1):
        for field in ("agent_id", "rating"):
            v = getattr(row, field)
            if not isinstance(v, str) or not v:
                raise EvaluationError(f"{source}: row {i}: field '{field}' must be a non-empty string, got {v!r}")
        try:
            value = float(row.value)
        except (TypeError, ValueError):
            raise EvaluationError(f"{source}: row {i}: field 'value' is not a number ({row.value!r})") from None
        if not math.isfinite(value):
            raise EvaluationError(f"{source}: row {i} (agent {row.agent_id}, rating {row.rating}): field 'value' is not finite")
    dup = out.duplicated(["agent_id", "rating"], keep=False)
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0]) + 1
        raise EvaluationError(
            f"{source}: row {i}: agent {out.iloc[i - 1]['agent_id']!r} has more than one value for rating "
            f"{out.iloc[i - 1]['rating']!r}"
        )
    out["value"] = out["value"].astype(float)
    out["stderr"] = out["stderr"].astype(float)
    return out[TRUTH_COLUMNS].reset_index(drop=True)


def truth_from_store(store: ExperienceStore, ratings: list[str] | None = None) -> pd.DataFrame:
    """Each agent's mean normalised rating (and its standard error) over its rated dialogues.
    Dialogues without a value for a rating do not count towards that rating's mean."""
    names = ratings if ratings is not None else store.rating_names
    unknown = sorted(set(names) - set(store.rating_names))
    if unknown:
        raise EvaluationError(f"store has no rating(s) {unknown}; it has {store.rating_names}")
    cols = ["agent_id"] + [S.RATING_PREFIX + n for n in names]
    df = store.dialogues.select(cols).to_pandas()
    rows = []
    for agent, group in df.groupby("agent_id", sort=True):
        for name in names:
            v = group[S.RATING_PREFIX + name].dropna().to_numpy(dtype=float)
            if len(v) == 0:
                continue  # no rated dialogue for this rating: the agent has no truth for it
            se = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else float("nan")
            rows.append((agent, name, float(v.mean()), se, len(v)))
    return pd.DataFrame(rows, columns=TRUTH_COLUMNS)


def truth_wide(truth: pd.DataFrame) -> pd.DataFrame:
    """agent_id × rating matrix of true values."""
    return truth.pivot(index="agent_id", columns="rating", values="value")
