"""Estimators the report derives from another estimator's run instead of training again.

``enigma-unnormalised`` (issue 7 item 8, "without post-normalisation") is the estimate
Σ ζ·r / N that every ENIGMA run computes before dividing by Σ ζ / N; the runner stores it in
the ``unnormalised`` column of ENIGMA's result rows. Turning those values into rows of their own
puts the ablation beside ENIGMA in every table and figure, from the same trained heads.
"""

from __future__ import annotations

import json
import math

import pandas as pd

UNNORMALISED_SUFFIX = "-unnormalised"
UNNORMALISED_LABEL = "ablation: the same run's estimate without post-normalisation (sum of zeta*r / N, not divided by the mean zeta)"


def with_unnormalised(results: pd.DataFrame, estimators: tuple[str, ...] = ("enigma",)) -> pd.DataFrame:
    """``results`` plus ``<estimator>-unnormalised`` rows for each named estimator whose rows
    carry unnormalised values (rows already present under that name are left alone; a failed
    or value-less row becomes an error row, so the report lists it rather than dropping it)."""
    frames = [results]
    present = set(results["estimator"])
    for name in estimators:
        derived = name + UNNORMALISED_SUFFIX
        rows = results[results["estimator"] == name]
        if rows.empty or derived in present or rows["unnormalised"].isna().all():
            continue
        out = rows.copy()
        out["estimator"] = derived
        values = pd.to_numeric(out["unnormalised"], errors="coerce")
        bad = ~values.map(lambda v: isinstance(v, float) and math.isfinite(v))
        out["estimate"] = values
        out["unnormalised"] = values
        out["labels"] = [json.dumps({**_labels(v), "ablation": UNNORMALISED_LABEL}, sort_keys=True) for v in out["labels"]]
        had_error = out["error"].map(lambda e: isinstance(e, str) and bool(e))
        out.loc[bad & ~had_error, "error"] = f"{name}: no unnormalised estimate recorded"
        out.loc[bad, "estimate"] = float("nan")
        frames.append(out)
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else results


def _labels(v) -> dict:
    if isinstance(v, dict):
        return dict(v)
    if isinstance(v, str) and v:
        try:
            return dict(json.loads(v))
        except (json.JSONDecodeError, TypeError, ValueError):
            return {}
    return {}
