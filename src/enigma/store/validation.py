"""Validating a store's tables with Great Expectations (ephemeral context, no project folder).

Critical expectations (schema and types, unique ids, ratings within their scales, non-empty
texts, valid roles, contiguous turn indices, at least one agent turn per dialogue) stop the
pipeline; agents with too few dialogues are a warning. The result is kept as JSON (GX's own
``to_json_dict`` per expectation, plus a summary) and as a readable Markdown report.

Great Expectations takes seconds to import, so it is imported only inside ``validate``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from enigma.dialogue import ROLES
from enigma.store import schema as S
from enigma.store.config import IngestConfig, SourceSpec

REPORT_JSON = "validation.json"
REPORT_MD = "validation.md"
N_EXAMPLES = 5
FAILED = "when_failed"  # key of an expectation's meta: the summary line of its failure

_INT_TYPES = ["int8", "int16", "int32", "int64", "Int32", "Int64", "int"]
_FLOAT_TYPES = ["float32", "float64", "Float64", "float"]
_STR_TYPES = ["object", "str", "string"]


class ValidationFailed(ValueError):
    """A critical expectation failed; the message names the table, column and example ids."""


@dataclass
class CheckResult:
    table: str
    expectation: str
    column: str | None
    severity: str
    success: bool
    description: str
    unexpected_count: int | None = None
    examples: list[Any] = field(default_factory=list)
    observed: Any = None
    gx: dict | None = None  # GX's own JSON for this expectation
    when_failed: str | None = None  # what a failure means, where the description would read as true

    def where(self) -> str:
        col = f".{self.column}" if self.column else ""
        return f"{self.table}{col}"

    def summary(self) -> str:
        n = f"{self.unexpected_count} rows, " if self.unexpected_count else ""
        ex = f"e.g. {', '.join(map(str, self.examples))}" if self.examples else ""
        obs = f"observed {self.observed!r}" if self.observed is not None and not self.examples else ""
        detail = "; ".join(x for x in (n.rstrip(", "), ex, obs) if x)
        said = self.description if self.success else self.when_failed or self.description
        return f"{self.where()}: {said}" + (f" ({detail})" if detail else "")


@dataclass
class ValidationReport:
    checks: list[CheckResult]
    counts: dict[str, int]

    @property
    def critical_failures(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.success and c.severity == "critical"]

    @property
    def warnings(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.success and c.severity != "critical"]

    @property
    def success(self) -> bool:
        return not self.critical_failures

    def raise_for_critical(self, where: str = "store") -> None:
        failed = self.critical_failures
        if failed:
            lines = "\n  ".join(c.summary() for c in failed)
            raise ValidationFailed(f"{where}: {len(failed)} critical expectation(s) failed:\n  {lines}")

    def to_json_dict(self) -> dict:
        return {
            "success": self.success,
            "counts": self.counts,
            "n_checks": len(self.checks),
            "critical_failures": [c.summary() for c in self.critical_failures],
            "warnings": [c.summary() for c in self.warnings],
            "checks": [
                {k: v for k, v in c.__dict__.items()} for c in self.checks
            ],
        }

    def to_markdown(self, title: str = "Experience store validation") -> str:
        status = "PASSED" if self.success else "FAILED"
        out = [f"# {title}: {status}", ""]
        out.append(", ".join(f"{k}: {v:,}" for k, v in self.counts.items()))
        out.append("")
        if self.critical_failures:
            out += ["## Critical failures", ""] + [f"- {c.summary()}" for c in self.critical_failures] + [""]
        if self.warnings:
            out += ["## Warnings", ""] + [f"- {c.summary()}" for c in self.warnings] + [""]
        out += ["## All expectations", "", "| table | column | expectation | severity | result | unexpected |",
                "|---|---|---|---|---|---|"]
        for c in self.checks:
            res = "ok" if c.success else "FAIL"
            out.append(f"| {c.table} | {c.column or ''} | {c.description} | {c.severity} | {res} | "
                       f"{c.unexpected_count if c.unexpected_count is not None else ''} |")
        return "\n".join(out) + "\n"

    def save(self, directory: str | Path) -> tuple[Path, Path]:
        directory = Path(directory)
        from enigma.writes import naming, write_text

        with naming(directory):
            directory.mkdir(parents=True, exist_ok=True)
        j, m = directory / REPORT_JSON, directory / REPORT_MD
        write_text(j, json.dumps(self.to_json_dict(), indent=2, default=_json_default) + "\n")
        write_text(m, self.to_markdown())
        return j, m


def _json_default(obj):
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    return str(obj)


# ---- derived frames -----------------------------------------------------------------------
def per_dialogue_turn_stats(dialogues: pa.Table, turns: pa.Table) -> pa.Table:
    """One row per dialogue: declared n_turns against what turns.parquet holds (row count,
    min/max index, distinct indices, agent turns). Contiguity is then a set of column checks."""
    is_agent = pc.cast(pc.equal(turns.column("role"), "agent"), pa.int64())
    t = pa.table({"dialog_id": turns.column("dialog_id"), "turn_index": turns.column("turn_index"), "is_agent": is_agent})
    agg = t.group_by("dialog_id").aggregate(
        [("turn_index", "count"), ("turn_index", "min"), ("turn_index", "max"),
         ("turn_index", "count_distinct"), ("is_agent", "sum")]
    )
    base = pa.table({"dialog_id": dialogues.column("dialog_id"), "n_turns": pc.cast(dialogues.column("n_turns"), pa.int64())})
    joined = base.join(agg, "dialog_id", join_type="left outer")
    n_rows = pc.fill_null(joined.column("turn_index_count"), 0)
    return pa.table({
        "dialog_id": joined.column("dialog_id"),
        "n_turns": joined.column("n_turns"),
        "n_turn_rows": n_rows,
        "min_turn_index": pc.fill_null(pc.cast(joined.column("turn_index_min"), pa.int64()), -1),
        "max_turn_index": pc.fill_null(pc.cast(joined.column("turn_index_max"), pa.int64()), -1),
        "expected_max_turn_index": pc.subtract(n_rows, 1),
        "n_distinct_turn_index": pc.fill_null(joined.column("turn_index_count_distinct"), 0),
        "n_agent_turns": pc.fill_null(joined.column("is_agent_sum"), 0),
    })


def per_agent_counts(dialogues: pa.Table) -> pa.Table:
    agg = dialogues.group_by("agent_id").aggregate([("dialog_id", "count")])
    return pa.table({"agent_id": agg.column("agent_id"), "n_dialogues": agg.column("dialog_id_count")})


# ---- the suites ---------------------------------------------------------------------------
def _suites(gx, dialogues: pa.Table, spec: SourceSpec, config: IngestConfig) -> dict[str, list]:
    E = gx.expectations
    rating_cols = [c for c in dialogues.column_names if c.startswith(S.RATING_PREFIX)]
    raw_cols = [c for c in dialogues.column_names if c.startswith(S.RAW_PREFIX)]

    d = [E.ExpectColumnToExist(column=c, description=f"column {c} exists") for c in ("dialog_id", "agent_id", "source", "n_turns", "meta")]
    d += [
        E.ExpectColumnValuesToNotBeNull(column="dialog_id", description="dialog_id is never null"),
        E.ExpectColumnValuesToBeUnique(column="dialog_id", description="dialog_id is unique"),
        E.ExpectColumnValuesToNotBeNull(column="agent_id", description="agent_id is never null"),
        E.ExpectColumnValuesToNotMatchRegex(column="agent_id", regex=r"^\s*$", description="agent_id is not blank"),
        E.ExpectColumnValuesToNotBeNull(column="source", description="source is never null"),
        E.ExpectColumnValuesToBeInTypeList(column="n_turns", type_list=_INT_TYPES, description="n_turns is an integer"),
        E.ExpectColumnValuesToBeBetween(column="n_turns", min_value=1, description="n_turns >= 1"),
    ]
    for c in rating_cols:
        d.append(E.ExpectColumnValuesToBeInTypeList(column=c, type_list=_FLOAT_TYPES, description=f"{c} is a float"))
        d.append(E.ExpectColumnValuesToBeBetween(column=c, min_value=0.0, max_value=1.0,
                                                 description=f"{c} normalised within [0, 1]"))
    for c in raw_cols:
        name = c[len(S.RAW_PREFIX):]
        d.append(E.ExpectColumnValuesToBeInTypeList(column=c, type_list=_FLOAT_TYPES, description=f"{c} is a float"))
        scale = spec.ratings.get(name)
        if scale is not None:
            d.append(E.ExpectColumnValuesToBeBetween(column=c, min_value=scale.min, max_value=scale.max,
                                                     description=f"{c} within its declared scale {scale.describe()}"))

    t = [E.ExpectColumnToExist(column=c, description=f"column {c} exists") for c in S.TURNS_SCHEMA.names]
    t += [
        E.ExpectColumnValuesToNotBeNull(column="dialog_id", description="dialog_id is never null"),
        E.ExpectColumnValuesToBeInSet(column="dialog_id", value_set=dialogues.column("dialog_id").to_pylist(),
                                      description="every turn belongs to a dialogue in dialogues.parquet"),
        E.ExpectColumnValuesToBeInTypeList(column="turn_index", type_list=_INT_TYPES, description="turn_index is an integer"),
        E.ExpectCompoundColumnsToBeUnique(column_list=["dialog_id", "turn_index"], description="(dialog_id, turn_index) is unique"),
        E.ExpectColumnValuesToNotBeNull(column="role", description="role is never null"),
        E.ExpectColumnValuesToBeInSet(column="role", value_set=list(ROLES), description=f"role is one of {list(ROLES)}"),
        E.ExpectColumnValuesToNotBeNull(column="text", description="text is never null"),
        E.ExpectColumnValuesToNotMatchRegex(column="text", regex=r"^\s*$", description="text is not empty or whitespace-only"),
        E.ExpectColumnValueLengthsToBeBetween(column="text", min_value=1, max_value=config.max_text_chars,
                                              description=f"text length within 1..{config.max_text_chars:,} (ingest.max_text_chars)"),
    ]
    p = [
        E.ExpectColumnPairValuesToBeEqual(column_A="n_turn_rows", column_B="n_turns",
                                          description="turns.parquet holds n_turns rows for the dialogue"),
        E.ExpectColumnValuesToBeBetween(column="min_turn_index", min_value=0, max_value=0,
                                        description="turn indices start at 0"),
        E.ExpectColumnPairValuesToBeEqual(column_A="max_turn_index", column_B="expected_max_turn_index",
                                          description="turn indices are contiguous (last index = rows - 1)"),
        E.ExpectColumnPairValuesToBeEqual(column_A="n_distinct_turn_index", column_B="n_turn_rows",
                                          description="turn indices are distinct"),
        E.ExpectColumnValuesToBeBetween(column="n_agent_turns", min_value=1,
                                        description="at least one agent turn per dialogue"),
    ]
    a = [
        E.ExpectColumnValuesToBeBetween(
            column="n_dialogues", min_value=config.min_dialogues_per_agent, severity="warning",
            description=f"agent has >= {config.min_dialogues_per_agent} dialogues (ingest.min_dialogues_per_agent)",
            meta={FAILED: f"agent has fewer than {config.min_dialogues_per_agent} dialogues (ingest.min_dialogues_per_agent)"}),
    ]
    return {"dialogues": d, "turns": t, "per_dialogue": p, "agents": a}


def _check_result(table: str, r) -> CheckResult:
    cfg = r.expectation_config
    res = r.result or {}
    examples = []
    for row in res.get("partial_unexpected_index_list") or []:
        key = row.get("dialog_id", row.get("agent_id")) if isinstance(row, dict) else row
        if key is not None and key not in examples:
            examples.append(key)
    if not examples and res.get("partial_unexpected_list"):
        examples = [repr(v)[:80] for v in res["partial_unexpected_list"]]
    if r.exception_info and r.exception_info.get("raised_exception"):
        observed = r.exception_info.get("exception_message")
    else:
        observed = res.get("observed_value")
    kwargs = cfg.kwargs
    column = kwargs.get("column") or ",".join(filter(None, [kwargs.get("column_A"), kwargs.get("column_B")])) \
        or ",".join(kwargs.get("column_list") or []) or None
    return CheckResult(
        table=table, expectation=cfg.type, column=column, severity=str(getattr(cfg.severity, "value", cfg.severity)),
        success=bool(r.success), description=cfg.description or cfg.type,
        unexpected_count=res.get("unexpected_count"), examples=examples[:N_EXAMPLES],
        observed=_json_default(observed) if observed is not None and not isinstance(observed, (str, int, float, list, dict)) else observed,
        gx=r.to_json_dict(), when_failed=(cfg.meta or {}).get(FAILED),
    )


def validate(dialogues: pa.Table, turns: pa.Table, spec: SourceSpec | None = None,
             config: IngestConfig | None = None) -> ValidationReport:
    """Run every expectation on the tables; never raises for failed expectations (see
    ``ValidationReport.raise_for_critical``)."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    spec = spec or SourceSpec()
    config = config or IngestConfig()
    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    ds = ctx.data_sources.add_pandas("store")
    frames = {"dialogues": (dialogues, "dialog_id"), "turns": (turns, "dialog_id")}
    # The derived checks need the basic columns; without them the column checks above fail.
    if {"dialog_id", "agent_id", "n_turns"} <= set(dialogues.column_names) and set(S.TURNS_SCHEMA.names) <= set(turns.column_names):
        frames["per_dialogue"] = (per_dialogue_turn_stats(dialogues, turns), "dialog_id")
        frames["agents"] = (per_agent_counts(dialogues), "agent_id")
    suites = _suites(gx, dialogues, spec, config)
    checks: list[CheckResult] = []
    for name, (table, key) in frames.items():
        if table.num_rows == 0:
            checks.append(CheckResult(name, "non_empty", None, "critical", False, "table has rows", 0))
            continue
        df = table.to_pandas()
        batch = ds.add_dataframe_asset(name).add_batch_definition_whole_dataframe("all").get_batch(
            batch_parameters={"dataframe": df})
        suite = gx.ExpectationSuite(name=name, expectations=suites[name])
        fmt = {"result_format": "SUMMARY", "partial_unexpected_count": 20}
        if key in df.columns:
            fmt["unexpected_index_column_names"] = [key]
        result = batch.validate(suite, result_format=fmt)
        checks += [_check_result(name, r) for r in result.results]
    counts = {"dialogues": dialogues.num_rows, "turns": turns.num_rows,
              "agents": len(set(dialogues.column("agent_id").to_pylist())) if "agent_id" in dialogues.column_names else 0}
    return ValidationReport(checks, counts)
