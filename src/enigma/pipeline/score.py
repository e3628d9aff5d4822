"""Scoring an agent that is not one of a benchmark's held-out agents: a new agent of the nightly
job's registry, or a target of ``enigma estimate``. The same scoring path as the benchmarks
(``evaluate_one``): the agent's own rated dialogues, if the store has any under its name, are not
part of its experience, and a result is reused while its inputs are unchanged."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa

from enigma.contracts import Estimator, Regime
from enigma.store.experience import ExperienceStore


def score_agent(
    store: ExperienceStore,
    est: Estimator,
    agent_id: str,
    targets: pa.Table | None,
    results_dir: str | Path | None,
    *,
    labels: dict[str, str] | None = None,
    exclude: Sequence[str] = (),
) -> dict[str, Any]:
    """One agent with one estimator, from its replies at the store's logged states. Returns
    ``{"estimator", "estimates", "unnormalised", "ess", "intervals", "diagnostics", "errors", "resumed",
    "degenerate"}`` (per rating; a rating without an estimate is None, with the reason in ``errors``;
    ``degenerate``: how many of the sampled replies were empty or repeated, or cut at the length
    limit where the agent records it; None without replies)."""
    from enigma.evaluation.errors import EvaluationError
    from enigma.evaluation.heldout import HeldOutSources
    from enigma.evaluation.loao import evaluate_one

    unsupported = set(est.regimes) - {Regime.NONE, Regime.REPLIES_AT_LOGGED_STATES}
    if unsupported:
        raise EvaluationError(
            f"estimator {est.name!r} needs {sorted(r.value for r in unsupported)}; a new agent can only be "
            "scored from its replies at logged states"
        )
    sources = HeldOutSources(target_actions=(lambda _a, _e: targets) if targets is not None else None, labels=labels or {})
    rows, resumed = evaluate_one(store, est, agent_id, sources, results_dir, exclude=exclude, require_in_store=False)
    records = rows.to_dict(orient="records")

    def per_rating(key: str) -> dict[str, float | None] | None:
        """rating -> value (None where there is none); None when no rating has one."""
        got = {r["rating"]: (None if r[key] is None or not math.isfinite(r[key]) else float(r[key])) for r in records}
        return got if any(v is not None for v in got.values()) else None

    return {
        "estimator": est.name,
        "estimates": {r["rating"]: (None if r["error"] else float(r["estimate"])) for r in records},
        "unnormalised": per_rating("unnormalised"),
        "ess": per_rating("ess"),
        "intervals": {r["rating"]: _interval(r) for r in records},
        "diagnostics": json.loads(records[0]["diagnostics"]) if records else {},
        "errors": {r["rating"]: r["error"] for r in records if r["error"]},
        "n_experience_dialogues": records[0]["n_experience_dialogues"] if records else None,
        "resumed": resumed,
        "degenerate": degenerate(targets),
    }


def degenerate(targets: pa.Table | None) -> dict[str, float | int] | None:
    """The degenerate replies among an agent's sampled ones (``enigma.sampling.degenerate``)."""
    from enigma.sampling.degenerate import count

    if targets is None or "text" not in targets.column_names:
        return None
    cuts = targets.column("at_token_limit").to_pylist() if "at_token_limit" in targets.column_names else None
    return count(targets.column("text").to_pylist(), cuts).as_dict()


def _interval(record: dict[str, Any]) -> list[float] | None:
    """A result row's sampling interval, or None where the estimator gave none."""
    lo, hi = record.get("interval_low"), record.get("interval_high")
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return [float(lo), float(hi)]
