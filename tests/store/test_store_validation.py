"""Great Expectations validation: each critical expectation fails on a table that breaks it,
and the failure names the table, the column and example ids."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from store_fixtures import dialogue, write_jsonl

from enigma.store.readers import read
from enigma.store.validation import ValidationFailed, validate


@pytest.fixture(scope="module")
def gx_loaded():
    import great_expectations  # noqa: F401  (pay the seconds-long import once, in setup)


@pytest.fixture
def tables(tmp_path, config, good_records, gx_loaded):
    r = read("jsonl", write_jsonl(tmp_path / "in.jsonl", good_records), config)
    return r.dialogues, r.turns, r.spec


def _set(table: pa.Table, column: str, values: list) -> pa.Table:
    i = table.column_names.index(column)
    return table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))


def _failed(report) -> dict[str, list]:
    return {c.description: c.examples for c in report.critical_failures}


def test_clean_tables_pass_and_report_is_saved(tmp_path, tables, config):
    d, t, spec = tables
    report = validate(d, t, spec, config)
    assert report.success and not report.warnings and len(report.checks) > 30
    j, m = report.save(tmp_path / "rep")
    data = json.loads(j.read_text())
    assert data["success"] is True and data["counts"] == {"dialogues": 6, "turns": 24, "agents": 2}
    assert all("gx" in c and c["gx"]["success"] for c in data["checks"])
    assert "PASSED" in m.read_text()
    report.raise_for_critical()  # no error


def test_duplicate_ids_and_out_of_scale_ratings(tables, config):
    d, t, spec = tables
    d = _set(d, "dialog_id", ["d0", "d0", "d2", "d3", "d4", "d5"])
    d = _set(d, "rating_overall", [0.0, 0.5, 1.5, 0.2, None, 0.1])
    d = _set(d, "raw_fun", [0.0, 1.0, 0.0, 7.0, 0.0, 1.0])
    report = validate(d, t, spec, config)
    failed = _failed(report)
    assert failed["dialog_id is unique"] == ["d0"]
    assert failed["rating_overall normalised within [0, 1]"] == ["d2"]
    assert failed["raw_fun within its declared scale 0..1 (min-max)"] == ["d3"]
    with pytest.raises(ValidationFailed) as err:
        report.raise_for_critical("in.jsonl")
    msg = str(err.value)
    assert "in.jsonl: 4 critical expectation(s) failed" in msg  # d1 turns are orphans now
    assert "dialogues.dialog_id: dialog_id is unique" in msg and "e.g. d0" in msg
    assert "dialogues.rating_overall" in msg and "d2" in msg


def test_turn_level_breakage(tables, config):
    d, t, spec = tables
    roles = t.column("role").to_pylist()
    texts = t.column("text").to_pylist()
    idx = t.column("turn_index").to_pylist()
    roles[1], texts[5], idx[11] = "bot", "  ", 7          # d0 bad role, d1 blank text, d2 gap in indices
    roles[13], roles[15] = "user", "user"                  # d3 has no agent turn
    t = _set(_set(_set(t, "role", roles), "text", texts), "turn_index", idx)
    failed = _failed(validate(d, t, spec, config))
    assert failed["role is one of ['user', 'agent']"] == ["d0"]
    assert failed["text is not empty or whitespace-only"] == ["d1"]
    assert failed["turn indices are contiguous (last index = rows - 1)"] == ["d2"]
    assert failed["at least one agent turn per dialogue"] == ["d3"]


def test_missing_turns_and_orphans(tables, config):
    d, t, spec = tables
    keep = [i for i, x in enumerate(t.column("dialog_id").to_pylist()) if x != "d4"]
    t = t.take(keep)
    t = _set(t, "dialog_id", ["zz"] + t.column("dialog_id").to_pylist()[1:])
    failed = _failed(validate(d, t, spec, config))
    assert "d4" in failed["turns.parquet holds n_turns rows for the dialogue"]
    assert failed["every turn belongs to a dialogue in dialogues.parquet"] == ["zz"]


def test_missing_column_and_empty_table(tables, config):
    d, t, spec = tables
    failed = _failed(validate(d.drop_columns(["agent_id"]), t.slice(0, 0), spec, config))
    assert "column agent_id exists" in failed and "table has rows" in failed


def test_small_agents_are_a_warning_not_an_error(tables, config):
    d, t, spec = tables
    d = _set(d, "agent_id", ["a", "a", "a", "a", "a", "lonely"])
    report = validate(d, t, spec, config)
    assert report.success
    (w,) = report.warnings
    assert w.severity == "warning" and w.examples == ["lonely"] and "min_dialogues_per_agent" in w.summary()
    assert "## Warnings" in report.to_markdown()
