"""What the pipeline tells MLflow about each (estimator, held-out agent): ``AgentResult``, built
from the leave-one-agent-out runner's rows or read from a JSON list."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping


@dataclass
class AgentResult:
    """Everything the pipeline knows about one held-out agent after estimation."""

    agent_id: str
    estimator: str
    estimates: dict[str, float]
    truth: dict[str, float] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    # metric name -> list of (step, value); e.g. the DICE loss and running estimates
    curves: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    # a file saved with torch.save(module): the trained zeta/nu heads, if the estimator has any
    model_path: str | None = None
    # why this (estimator, agent) has no result (e.g. the agent's server was down); its child
    # run is then marked FAILED with this reason as its "error" tag
    error: str | None = None

    def mean_abs_error(self) -> float | None:
        errs = [abs(self.estimates[k] - v) for k, v in self.truth.items() if k in self.estimates]
        errs = [e for e in errs if _finite(e)]
        return sum(errs) / len(errs) if errs else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "estimator": self.estimator,
            "estimates": self.estimates,
            "truth": self.truth,
            "params": self.params,
            "diagnostics": self.diagnostics,
            "curves": {k: [list(p) for p in v] for k, v in self.curves.items()},
            "model_path": self.model_path,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "AgentResult":
        return cls(
            agent_id=d["agent_id"],
            estimator=d["estimator"],
            estimates=dict(d["estimates"]),
            truth=dict(d.get("truth") or {}),
            params=dict(d.get("params") or {}),
            diagnostics=dict(d.get("diagnostics") or {}),
            curves={k: [(int(s), float(v)) for s, v in pts] for k, pts in (d.get("curves") or {}).items()},
            model_path=d.get("model_path"),
            error=d.get("error"),
        )


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(float(x))


def load_results(path: str | Path) -> list[AgentResult]:
    """Read the JSON list of per-agent results that the pipeline writes."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of per-agent results")
    out = []
    for i, d in enumerate(data):
        try:
            out.append(AgentResult.from_dict(d))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: record {i}: bad per-agent result ({exc!r})") from exc
    return out


def results_from_rows(
    rows: Iterable[Mapping[str, Any]],
    truth: Mapping[tuple[str, str], float] | None = None,
    curves: "Any | None" = None,
) -> list[AgentResult]:
    """Group the leave-one-agent-out runner's rows (one per estimator, agent, rating; see
    ``enigma.evaluation.results.RESULT_COLUMNS``) into one ``AgentResult`` per (estimator, agent).
    ``truth`` maps (agent_id, rating) to the true value; ``curves`` is the runner's learning-curve
    table (columns estimator, agent_id, step and one column per logged quantity)."""
    grouped: dict[tuple[str, str], AgentResult] = {}
    for i, r in enumerate(rows):
        try:
            key = (str(r["estimator"]), str(r["agent_id"]))
            rating, value = str(r["rating"]), r["estimate"]
        except KeyError as exc:
            raise ValueError(f"result row {i}: field {exc} missing") from None
        res = grouped.get(key)
        if res is None:
            diags = r.get("diagnostics") or "{}"
            res = grouped[key] = AgentResult(
                agent_id=key[1],
                estimator=key[0],
                estimates={},
                params={
                    "regime": r.get("regime"),
                    "labels": r.get("labels"),
                    "n_experience_dialogues": r.get("n_experience_dialogues"),
                },
                diagnostics=json.loads(diags) if isinstance(diags, str) else dict(diags),
                model_path=r.get("heads_path"),
            )
            if _finite(r.get("seconds")):
                res.diagnostics["seconds"] = float(r["seconds"])
        if r.get("error"):
            res.diagnostics[f"error.{rating}"] = 1.0
            res.params[f"error.{rating}"] = r["error"]
            continue
        if _finite(value):
            res.estimates[rating] = float(value)
        for extra in ("unnormalised", "ess", "interval_low", "interval_high"):
            if _finite(r.get(extra)):
                res.diagnostics[f"{extra}.{rating}"] = float(r[extra])
        if truth and (key[1], rating) in truth:
            res.truth[rating] = float(truth[(key[1], rating)])
    if curves is not None and len(curves):
        value_cols = [c for c in curves.columns if c not in ("estimator", "agent_id", "step")]
        step_col = "step" if "step" in curves.columns else None
        for (est, agent), frame in curves.groupby(["estimator", "agent_id"]):
            res = grouped.get((est, agent))
            if res is None:
                continue
            steps = frame[step_col].astype(int).tolist() if step_col else list(range(len(frame)))
            for c in value_cols:
                vals = frame[c].tolist()
                res.curves[c] = [(s, float(v)) for s, v in zip(steps, vals) if _finite(v)]
    return list(grouped.values())


def results_from_report(rows: Iterable[Mapping[str, Any]], summary: Mapping[str, Any], curves: "Any | None" = None) -> list[AgentResult]:
    """``results_from_rows`` with the truth a report's summary holds for every (agent, rating)."""
    truth = {
        (agent, r): cell["truth"]
        for agent, per in (summary.get("agents") or {}).items()
        for r, cell in per.items()
        if isinstance(cell, dict) and cell.get("truth") is not None
    }
    return results_from_rows(rows, truth, curves)


def headline_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """A report's numbers as MLflow metrics of the parent run: every estimator's mean
    correlations and its Pearson and Spearman per rating."""
    out = {}
    for est, entry in (summary.get("estimators") or {}).items():
        for k in ("mean_pearson", "mean_spearman", "mean_kendall"):
            if isinstance(entry.get(k), (int, float)):
                out[f"{est}.{k}"] = entry[k]
        for r in summary.get("ratings") or []:
            for k in ("pearson", "spearman"):
                v = (entry.get(r) or {}).get(k)
                if isinstance(v, (int, float)):
                    out[f"{est}.{r}.{k}"] = v
    return out
