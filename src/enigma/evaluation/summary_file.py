"""``summary.json`` on disk (``enigma.evaluation.summary`` builds it): written, read back, and its
estimates as tables.

``agents`` is written as ``agent_estimates``: ``{"columns": ["truth", "<est>", ...], "rows":
{"<agent>": {"<rating>": [t, e, ...]}}}``, every estimator's name once rather than once per agent
and rating (half the size of a full report's summary: tracked reports stay within their budget,
tests/test_reports_in_git.py); ``read_summary`` and ``agent_cells`` give the nested shape back,
value for value.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from enigma.evaluation.correlation import EstimatorScore, score_estimator
from enigma.evaluation.errors import EvaluationError

PACKED_AGENTS = "agent_estimates"


def pack_agents(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary as written: ``agents`` replaced, in its place, by ``agent_estimates`` (columns
    and rows; every cell of a summary has the same keys, the truth and then each estimator)."""
    agents = summary["agents"]
    columns = next((list(cell) for per in agents.values() for cell in per.values()), ["truth"])
    rows = {a: {r: [cell.get(c) for c in columns] for r, cell in per.items()} for a, per in agents.items()}
    return {(PACKED_AGENTS if k == "agents" else k): ({"columns": columns, "rows": rows} if k == "agents" else v)
            for k, v in summary.items()}


def agent_cells(summary: dict[str, Any], where: str = "summary") -> dict[str, dict[str, dict[str, Any]]]:
    """``{agent: {rating: {"truth": t, "<est>": e}}}`` of a summary in memory or as written."""
    if "agents" in summary:
        return summary["agents"]
    packed = summary[PACKED_AGENTS]
    columns = packed["columns"]
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    for a, per in packed["rows"].items():
        cells[a] = {}
        for r, values in per.items():
            if not isinstance(values, list) or len(values) != len(columns):
                raise EvaluationError(f"{where}: {PACKED_AGENTS}.rows[{a!r}][{r!r}]: expected {len(columns)} values "
                                      f"(one per column), got {values!r}")
            cells[a][r] = dict(zip(columns, values))
    return cells


def summary_estimates(summary: dict[str, Any], name: str) -> pd.DataFrame:
    """[agent, rating] the estimates of estimator ``name`` in a summary (``"truth"``: the truth),
    agents without any left out."""
    table = pd.DataFrame({a: {r: cells.get(r, {}).get(name) for r in summary["ratings"]}
                          for a, cells in agent_cells(summary).items()}).T
    return table.dropna(how="all").astype(float)


def score_in_report(summary: dict[str, Any], name: str) -> EstimatorScore:
    """Estimator ``name`` of a summary scored against its truth as the report scored it: the
    report's bootstrap resamples of the agents and seed, so two scores of one report pair."""
    cfg = summary.get("settings", {})
    truth = summary_estimates(summary, "truth")
    est = summary_estimates(summary, name)
    return score_estimator(name, est, truth.loc[est.index], summary["ratings"],
                           resamples=cfg.get("bootstrap_resamples", 1000), seed=cfg.get("seed", 0))


def write_summary(summary: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # one value per line (git diffs stay readable) without indentation or spaces after separators:
    # a third smaller than indent=2, which keeps tracked reports/ within its budget with the full
    # reports' summaries in git (tests/test_reports_in_git.py)
    path.write_text(json.dumps(pack_agents(summary), indent="", separators=(",", ":"), allow_nan=False) + "\n")
    return path


def read_summary(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise EvaluationError(f"{path}: summary not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise EvaluationError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    except UnicodeDecodeError as exc:
        raise EvaluationError(f"{path}: not a report summary (not UTF-8 text: {exc})") from exc
    for key in ("benchmark", "n_agents", "ratings", "estimators"):
        if key not in data:
            raise EvaluationError(f"{path}: field '{key}' missing; not a report summary")
    if "agents" in data:  # as written before the packed layout, or by hand
        return data
    if not isinstance(data.get(PACKED_AGENTS), dict) or not {"columns", "rows"} <= set(data[PACKED_AGENTS]):
        raise EvaluationError(f"{path}: field '{PACKED_AGENTS}' (columns, rows) missing; not a report summary")
    cells = agent_cells(data, str(path))
    return {("agents" if k == PACKED_AGENTS else k): (cells if k == PACKED_AGENTS else v) for k, v in data.items()}
