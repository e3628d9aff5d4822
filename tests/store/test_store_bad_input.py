"""Every kind of bad input ends in a reject row (naming file, line, field) or a clear fatal
error; the good records around it still load."""

from __future__ import annotations

import json

import pytest

from enigma.store.readers import read
from enigma.store.readers.base import IngestError

from store_fixtures import dialogue, nested, write_jsonl


def _rejects(result) -> list[dict]:
    return result.rejects.to_pylist()


def _one_bad(tmp_path, config, good_records, bad, lineno=3):
    """Six good dialogues with line ``lineno`` replaced by ``bad`` (a record or raw bytes)."""
    raw = {lineno: bad} if isinstance(bad, bytes) else {lineno: json.dumps(bad).encode()}
    f = write_jsonl(tmp_path / "in.jsonl", good_records, raw)
    result = read("jsonl", f, config)
    assert result.dialogues.num_rows == 5, _rejects(result)
    (rej,) = _rejects(result)
    assert rej["source_file"] == str(f) and rej["record"] == lineno
    assert result.n_records == 6
    return rej


def test_good_records_all_load(tmp_path, config, good_records):
    result = read("jsonl", write_jsonl(tmp_path / "in.jsonl", good_records), config)
    assert result.dialogues.num_rows == 6 and result.turns.num_rows == 24 and result.rejects.num_rows == 0
    row = result.dialogues.to_pylist()[1]
    assert row["raw_overall"] == 2 and row["rating_overall"] == 0.25 and row["rating_fun"] == 1.0


def test_malformed_json_names_the_line(tmp_path, config, good_records):
    rej = _one_bad(tmp_path, config, good_records, b'{"dialog_id": "x", "turns": [', lineno=4)
    assert rej["reason"].startswith("malformed JSON")


@pytest.mark.parametrize("field", ["dialog_id", "agent_id", "turns"])
def test_missing_required_field(tmp_path, config, good_records, field):
    rec = dialogue("bad")
    del rec[field]
    rej = _one_bad(tmp_path, config, good_records, rec)
    assert rej["field"] == field and "missing" in rej["reason"]


@pytest.mark.parametrize("rec, field, words", [
    (dialogue(7), "dialog_id", "must be a string"),
    (dialogue("bad", ["x"]), "agent_id", "must be a string"),
    (dialogue("bad", turns="hello"), "turns", "must be a list"),
    (dialogue("bad", turns=[{"role": "user", "text": 5}, {"role": "agent", "text": "x"}]), "turns[0].text", "must be a string"),
    (dialogue("bad", turns=[{"role": "agent"}]), "turns[0].text", "missing"),
    (dialogue("bad", ratings={"overall": "4"}), "ratings.overall", "finite number"),
    (dialogue("bad", ratings={"overall": True}), "ratings.overall", "finite number"),
    (dialogue("bad", ratings=[4]), "ratings", "must be an object"),
    (dialogue("bad", meta="rater 7"), "meta", "must be an object"),
    (dialogue("bad", rating={"overall": 4}), "rating", "unknown field"),
    (["not", "an", "object"], None, "expected a JSON object"),
])
def test_mistyped_fields(tmp_path, config, good_records, rec, field, words):
    rej = _one_bad(tmp_path, config, good_records, rec)
    assert rej["field"] == field and words in rej["reason"]


@pytest.mark.parametrize("text", ["", "   \t\n "])
def test_empty_or_whitespace_text(tmp_path, config, good_records, text):
    rec = dialogue("bad", turns=[{"role": "user", "text": "hi"}, {"role": "agent", "text": text}])
    rej = _one_bad(tmp_path, config, good_records, rec)
    assert rej["field"] == "turns[1].text" and "whitespace" in rej["reason"] and rej["dialog_id"] == "bad"


def test_unknown_role(tmp_path, config, good_records):
    rec = dialogue("bad", turns=[{"role": "user", "text": "hi"}, {"role": "bot", "text": "hey"}])
    rej = _one_bad(tmp_path, config, good_records, rec)
    assert rej["field"] == "turns[1].role" and "unknown role 'bot'" in rej["reason"]


@pytest.mark.parametrize("value", [6, 0, -1])
def test_rating_outside_scale(tmp_path, config, good_records, value):
    rej = _one_bad(tmp_path, config, good_records, dialogue("bad", ratings={"overall": value}))
    assert rej["field"] == "ratings.overall" and "outside its scale 1..5" in rej["reason"]


def test_rating_without_declared_scale(tmp_path, config, good_records):
    rej = _one_bad(tmp_path, config, good_records, dialogue("bad", ratings={"overall": 3, "wit": 2}))
    assert rej["field"] == "ratings.wit" and "--scale wit=MIN:MAX" in rej["reason"]


def test_missing_rating_is_null_not_dropped(tmp_path, config, good_records):
    good_records[0]["ratings"] = {"overall": 5}
    result = read("jsonl", write_jsonl(tmp_path / "in.jsonl", good_records), config)
    row = result.dialogues.to_pylist()[0]
    assert row["rating_overall"] == 1.0 and row["rating_fun"] is None and row["raw_fun"] is None


def test_duplicate_dialog_id_keeps_the_first(tmp_path, config, good_records):
    rej = _one_bad(tmp_path, config, good_records, dialogue("d0"))
    assert rej["field"] == "dialog_id" and rej["dialog_id"] == "d0"
    assert "duplicate" in rej["reason"] and "in.jsonl:1" in rej["reason"]


def test_dialogue_without_agent_turn(tmp_path, config, good_records):
    rec = dialogue("bad", turns=[{"role": "user", "text": "hello?"}, {"role": "user", "text": "anyone?"}])
    rej = _one_bad(tmp_path, config, good_records, rec)
    assert rej["field"] == "turns" and "no agent turn" in rej["reason"]


def test_dialogue_without_turns(tmp_path, config, good_records):
    rej = _one_bad(tmp_path, config, good_records, dialogue("bad", turns=[]))
    assert rej["field"] == "turns" and rej["reason"] == "no turns"


def test_non_utf8_bytes_reject_only_that_line(tmp_path, config, good_records):
    bad = json.dumps(dialogue("bad")).encode().replace(b"hi there", b"hi \xff\xfe there")
    rej = _one_bad(tmp_path, config, good_records, bad, lineno=2)
    assert "not valid UTF-8" in rej["reason"] and "0xff" in rej["reason"]


def test_multi_megabyte_utterance(tmp_path, config, good_records):
    huge = "blah " * 600_000  # 3 MB
    rec = dialogue("bad", turns=[{"role": "user", "text": "hi"}, {"role": "agent", "text": huge}])
    rej = _one_bad(tmp_path, config, good_records, rec)
    assert rej["field"] == "turns[1].text" and "3,000,000 characters" in rej["reason"]
    assert "max_text_chars=1,000" in rej["reason"]


def test_empty_file_is_a_fatal_error_alone(tmp_path, config):
    f = tmp_path / "empty.jsonl"
    f.write_bytes(b"")
    result = read("jsonl", f, config)
    assert result.dialogues.num_rows == 0
    assert _rejects(result) == [{"source_file": str(f), "record": None, "dialog_id": None, "field": None,
                                 "reason": "empty file (no records)"}]


def test_empty_file_among_others_is_a_reject(tmp_path, config, good_records):
    write_jsonl(tmp_path / "a.jsonl", good_records)
    (tmp_path / "b.jsonl").write_text("\n\n")
    result = read("jsonl", tmp_path, config)
    assert result.dialogues.num_rows == 6
    assert [r["reason"] for r in _rejects(result)] == ["empty file (no records)"]


def test_blank_lines_are_not_records(tmp_path, config, good_records):
    f = write_jsonl(tmp_path / "in.jsonl", good_records)
    f.write_bytes(f.read_bytes().replace(b"\n", b"\n\n", 2))
    result = read("jsonl", f, config)
    assert result.dialogues.num_rows == 6 and result.rejects.num_rows == 0


def test_missing_path_is_fatal(tmp_path, config):
    for fmt in ("jsonl", "see2019", "see2019-selfplay", "fed", "parquet"):
        with pytest.raises(IngestError, match="no such file or directory"):
            read(fmt, tmp_path / "nope", config)


def test_directory_without_inputs_is_fatal(tmp_path, config):
    with pytest.raises(IngestError, match=r"no \*.jsonl files"):
        read("jsonl", tmp_path, config)


def test_unknown_format_is_fatal(tmp_path, config):
    with pytest.raises(IngestError, match="unknown format 'csv'"):
        read("csv", tmp_path, config)


def test_byte_order_mark_is_not_content(tmp_path, config, good_records):
    f = write_jsonl(tmp_path / "in.jsonl", good_records)
    f.write_bytes(b"\xef\xbb\xbf" + f.read_bytes())
    result = read("jsonl", f, config)
    assert result.dialogues.num_rows == 6 and result.rejects.num_rows == 0


# A lone UTF-16 surrogate ("\ud83d", half an emoji) is a valid JSON escape but not Unicode
# text; json.dumps writes it as that escape. Wherever it sits, only its record is rejected.
@pytest.mark.parametrize("rec, field", [
    (dialogue("bad", turns=[{"role": "user", "text": "hi"}, {"role": "agent", "text": "nice \ud83d"}]), "turns[1].text"),
    (dialogue("bad\ud83d"), "dialog_id"),
    (dialogue("bad", "bot-\ud83d"), "agent_id"),
    (dialogue("bad", meta={"note": ["ok", "cut \ud83d"]}), "meta.note[1]"),
    (dialogue("bad", meta={"n\ud83dte": "x"}), "meta.n\\ud83dte"),
    (dialogue("bad", ratings={"overall": 3, "f\ud83dn": 1}), "ratings.f\\ud83dn"),
    (dialogue("bad", **{"x\ud83d": 1}), "x\\ud83d"),
])
def test_lone_surrogate_rejects_only_its_record(tmp_path, config, good_records, rec, field):
    rej = _one_bad(tmp_path, config, good_records, rec)
    assert rej["field"] == field and "not valid Unicode: lone surrogate \\ud83d" in rej["reason"], rej
    assert rej["dialog_id"] == ("bad\\ud83d" if field == "dialog_id" else "bad")


def test_meta_nesting_up_to_the_limit_loads(tmp_path, config, good_records):
    # the record is level 1 and meta level 2: 30 more levels make 32, the limit
    good_records[0]["meta"] = {"a": nested(30)}
    result = read("jsonl", write_jsonl(tmp_path / "in.jsonl", good_records), config)
    assert result.dialogues.num_rows == 6 and result.rejects.num_rows == 0
    assert config.max_json_depth == 32


@pytest.mark.parametrize("levels", [31, 900])
def test_meta_nested_over_the_limit_is_rejected(tmp_path, config, good_records, levels):
    rej = _one_bad(tmp_path, config, good_records, dialogue("bad", meta={"a": nested(levels)}))
    assert rej["field"] == "meta" and rej["dialog_id"] == "bad"
    assert rej["reason"] == "nested more than 32 levels deep (limit: ingest.max_json_depth)"


def test_meta_nested_100000_deep_is_rejected_not_a_recursion_error(tmp_path, config, good_records):
    line = json.dumps(dialogue("bad"))[:-1] + ', "meta": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    rej = _one_bad(tmp_path, config, good_records, line.encode())
    assert rej["reason"].startswith("JSON nested too deep to parse") and "ingest.max_json_depth" in rej["reason"]
