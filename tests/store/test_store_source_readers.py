"""The See 2019, self-play, FED and Parquet readers on small hand-made inputs in their formats."""

from __future__ import annotations

import json

import pytest
from store_fixtures import nested

from enigma.params import Params
from enigma.store.experience import ExperienceStore
from enigma.store.readers import read
from enigma.store.readers.base import IngestError

RATINGS = {"enjoy": 3, "interest": 2, "listen": 4, "turing": 1, "avoid_rep": 3, "make_sense": 4,
           "fluency": 4, "persona_guess": 1, "inquisitive": 3}


@pytest.fixture
def cfg():
    return Params.load("params.yaml").ingest


def see_record(aid: str, bot_first: bool = True, **changes) -> dict:
    speakers = ["model", "human_evaluator"] if bot_first else ["human_evaluator", "model"]
    rec = {
        "assignment_id_hashed": aid,
        "dialog": [{"speaker": speakers[i % 2], "text": f"utterance {i}"} for i in range(12)],
        "evaluation_results": dict(RATINGS),
        "evaluator_id_hashed": "ev1", "human_persona": "i like cats.", "model_persona": "i like dogs.",
        "model_bucket": "", "model_name": "toy_model", "model_type": "baseline", "oz_id_hashed": None,
        "start_time": 0.0, "total_time": 100.0,
    }
    rec.update(changes)
    return rec


def test_see2019_roles_order_normalisation_and_meta(tmp_path, cfg):
    d = tmp_path / "evallog"
    d.mkdir()
    (d / "toy_model.jsonl").write_text("\n".join(json.dumps(r) for r in [see_record("a1"), see_record("a2", bot_first=False)]))
    r = read("see2019", tmp_path, cfg)
    assert r.dialogues.num_rows == 2 and r.turns.num_rows == 24
    turns = r.turns.to_pylist()
    assert turns[0]["role"] == "agent" and turns[12]["role"] == "user"  # the bot spoke first in a1
    row = r.dialogues.to_pylist()[0]
    assert row["rating_enjoy"] == 0.75 and row["raw_enjoy"] == 3 and row["rating_avoid_rep"] == 0.75
    assert row["rating_persona_guess"] == 0.25
    assert row["rating_reward"] == pytest.approx(sum(v / 4 for v in RATINGS.values()) / 9)
    meta = json.loads(row["meta"])
    assert meta["human_persona"] == "i like cats." and meta["first_speaker"] == "agent"
    assert row["agent_id"] == "toy_model" and row["source"] == "see2019"


@pytest.mark.parametrize("change, field, words", [
    ({"evaluation_results": {**RATINGS, "enjoy": 5}}, "ratings.enjoy", "outside its scale"),
    ({"evaluation_results": {k: v for k, v in RATINGS.items() if k != "fluency"}}, "evaluation_results.fluency", "missing"),
    ({"dialog": [{"speaker": "robot", "text": "hi"}]}, "dialog[0].speaker", "unknown speaker"),
    ({"model_name": None}, "model_name", "missing"),
])
def test_see2019_bad_records_are_rejected(tmp_path, cfg, change, field, words):
    f = tmp_path / "toy_model.jsonl"
    f.write_text(json.dumps(see_record("ok")) + "\n" + json.dumps(see_record("bad", **change)) + "\n")
    r = read("see2019", f, cfg)
    assert r.dialogues.column("dialog_id").to_pylist() == ["ok"]
    (rej,) = r.rejects.to_pylist()
    assert rej["record"] == 2 and rej["field"] == field and words in rej["reason"] and rej["dialog_id"] == "bad"


def test_see2019_without_declared_scales_is_fatal(tmp_path):
    f = tmp_path / "toy_model.jsonl"
    f.write_text(json.dumps(see_record("ok")) + "\n")
    from enigma.store.config import IngestConfig

    with pytest.raises(IngestError, match="no rating scales declared for source 'see2019'"):
        read("see2019", f, IngestConfig())


def test_selfplay_sides_and_broken_chats(tmp_path, cfg):
    chat = [[f"a{i}", f"b{i}"] for i in range(3)]
    (tmp_path / "bot_x.jsonl").write_text(json.dumps([chat, chat]))
    (tmp_path / "bot_y.jsonl").write_text(json.dumps([[["x"] * 6, ["y"] * 6]]))  # the known broken shape
    (tmp_path / "bot_z.jsonl").write_bytes(b"[[[\"a\", \"b\"]]")  # truncated JSON
    (tmp_path / "bot_w.jsonl").write_bytes(b"")
    r = read("see2019-selfplay", tmp_path, cfg)
    assert r.dialogues.column("dialog_id").to_pylist() == ["selfplay:bot_x:0001", "selfplay:bot_x:0002"]
    assert set(r.dialogues.column("source").to_pylist()) == {"see2019-selfplay"}
    assert r.dialogues.schema.names == ["dialog_id", "agent_id", "source", "n_turns", "meta"]
    t = r.turns.to_pylist()[:2]
    assert (t[0]["role"], t[0]["text"], t[1]["role"], t[1]["text"]) == ("user", "a0", "agent", "b0")
    rej = {row["source_file"].split("/")[-1]: row for row in r.rejects.to_pylist()}
    assert rej["bot_y.jsonl"]["record"] == 1 and "pair" in rej["bot_y.jsonl"]["reason"]
    assert rej["bot_z.jsonl"]["reason"].startswith("malformed JSON")
    assert rej["bot_w.jsonl"]["reason"] == "empty file"


FED_ANN = {"Coherent": [2, 2, 1, 2, 2], "Error recovery": ["N/A (no errors)", 1, 1, 2, 2], "Consistent": [1, 1, 1, 1, 0],
           "Diverse": [0, 2, 1, 1, 2], "Depth": [0, 1, 0, 1, 2], "Likeable": [1, 1, 0, 2, 2],
           "Understanding": [2, 1, 2, 2, 2], "Flexible": [2, 2, 1, 2, 2], "Informative": [0, 1, 0, 2, 2],
           "Inquisitive": [2, 1, 0, 2, 2], "Overall": [3, 1, 2, 3, 4]}


def test_fed_dialogue_level_means_and_turn_level_rejects(tmp_path, cfg):
    entries = [
        {"context": "User: Hi!\nSystem: Hello.\nUser: Bye", "system": "Meena", "annotations": FED_ANN},
        {"context": "User: Hi!", "response": "System: Hey", "system": "Meena", "annotations": {"Overall": [1]}},
        {"context": "Usr: Hi!\nSystem: Hello.", "system": "Mitsuku", "annotations": FED_ANN},
        {"context": "User: Hi!\nSystem: Hello.", "system": "Human", "annotations": {**FED_ANN, "Overall": [5, 1]}},
    ]
    (tmp_path / "fed_data.json").write_text(json.dumps(entries))
    r = read("fed", tmp_path, cfg)
    (row,) = r.dialogues.to_pylist()
    assert row["dialog_id"] == "fed:0001" and row["agent_id"] == "Meena" and row["n_turns"] == 3
    assert row["raw_error_recovery"] == 1.5 and row["rating_error_recovery"] == 0.75  # N/A left out
    assert row["raw_overall"] == 2.6 and row["rating_overall"] == pytest.approx(0.65)
    assert [t["role"] for t in r.turns.to_pylist()] == ["user", "agent", "user"]
    rej = r.rejects.to_pylist()
    assert [x["record"] for x in rej] == [2, 3, 4]
    assert "turn-level" in rej[0]["reason"] and "prefix" in rej[1]["reason"] and "outside its scale" in rej[2]["reason"]


def test_fed_unreadable_file_is_fatal(tmp_path, cfg):
    (tmp_path / "fed_data.json").write_bytes(b"\xff\xfe[")
    with pytest.raises(IngestError, match="not valid UTF-8"):
        read("fed", tmp_path, cfg)


def test_parquet_reads_a_written_store_back(tmp_path, cfg):
    d = tmp_path / "evallog"
    d.mkdir()
    (d / "toy_model.jsonl").write_text(json.dumps(see_record("a1")) + "\n{oops\n")
    r = read("see2019", tmp_path, cfg)
    ExperienceStore(r.dialogues, r.turns, r.rejects).write(tmp_path / "store", {"source": "see2019", "spec": r.spec.model_dump()})
    back = read("parquet", tmp_path / "store", cfg)
    assert back.dialogues.equals(r.dialogues) and back.turns.equals(r.turns) and back.rejects.equals(r.rejects)
    assert back.source == "see2019" and back.spec == r.spec


def test_parquet_not_a_store_is_fatal(tmp_path, cfg):
    (tmp_path / "dialogues.parquet").write_text("not parquet")
    (tmp_path / "turns.parquet").write_text("not parquet")
    with pytest.raises(IngestError, match="not a readable Parquet file"):
        read("parquet", tmp_path, cfg)


def test_corrupt_rejects_file_is_named(tmp_path, cfg):
    from enigma.store.experience import StoreError

    d = tmp_path / "evallog"
    d.mkdir()
    (d / "toy_model.jsonl").write_text(json.dumps(see_record("a1")) + "\n")
    r = read("see2019", tmp_path, cfg)
    ExperienceStore(r.dialogues, r.turns, r.rejects).write(tmp_path / "store")
    (tmp_path / "store" / "rejects.parquet").write_bytes(b"garbage")
    with pytest.raises(StoreError, match="rejects.parquet: not a readable Parquet file"):
        ExperienceStore.open(tmp_path / "store")


# A lone surrogate ("\ud83d", half an emoji; json.dumps writes it as that JSON escape) or
# runaway nesting rejects one record in every JSON format, naming the field as the input does.
def test_see2019_lone_surrogate_or_deep_record_is_rejected(tmp_path, cfg):
    cut = see_record("cut")
    cut["dialog"][3]["text"] = "haha \ud83d"
    deep = see_record("deep", extra={"x": nested(40)})
    f = tmp_path / "toy_model.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in [see_record("ok"), cut, deep]) + "\n")
    r = read("see2019", f, cfg)
    assert r.dialogues.column("dialog_id").to_pylist() == ["ok"]
    rej = r.rejects.to_pylist()
    assert [(x["record"], x["dialog_id"], x["field"]) for x in rej] == [(2, "cut", "dialog[3].text"), (3, "deep", "extra")]
    assert "lone surrogate \\ud83d at character 6" in rej[0]["reason"] and "max_json_depth" in rej[1]["reason"]


def test_fed_lone_surrogate_or_deep_entry_is_rejected(tmp_path, cfg):
    entries = [
        {"context": "User: Hi!\nSystem: Hello.", "system": "Meena", "annotations": FED_ANN},
        {"context": "User: Hi \ud83d\nSystem: Hello.", "system": "Meena", "annotations": FED_ANN},
        {"context": "User: Hi!\nSystem: Hello.", "system": "Meena", "annotations": {**FED_ANN, "Overall": ["N/A \udc00"]}},
        {"context": "User: Hi!\nSystem: Hello.", "system": "Meena\ud83d", "annotations": FED_ANN},
        {"context": "User: Hi!\nSystem: Hello.", "system": "Meena", "annotations": FED_ANN, "x": nested(40)},
    ]
    (tmp_path / "fed_data.json").write_text(json.dumps(entries))
    r = read("fed", tmp_path, cfg)
    assert r.dialogues.column("dialog_id").to_pylist() == ["fed:0001"]
    rej = r.rejects.to_pylist()
    assert [(x["record"], x["field"]) for x in rej] == [(2, "context"), (3, "annotations.Overall[0]"), (4, "system"), (5, "x")]
    assert all("lone surrogate" in x["reason"] for x in rej[:3]) and "max_json_depth" in rej[3]["reason"]


def test_fed_file_nested_too_deep_to_parse_is_fatal_and_named(tmp_path, cfg):
    (tmp_path / "fed_data.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(IngestError, match="fed_data.json: JSON nested too deep to parse"):
        read("fed", tmp_path, cfg)


def test_selfplay_lone_surrogates_in_a_chat_or_the_file_name(tmp_path, cfg):
    import os

    good = [["a0", "b0"], ["a1", "b1"]]
    (tmp_path / "bot_x.jsonl").write_text(json.dumps([good, [["a0", "cut \ud83d"]]]))
    # a file name that is not UTF-8 (Python decodes it with surrogates) names the agent
    bad_name = tmp_path / os.fsdecode(b"bot_\xff.jsonl")
    bad_name.write_text(json.dumps([good]))
    (tmp_path / "bot_deep.jsonl").write_text("[" + "[" * 100_000 + "]" * 100_000 + "]")
    r = read("see2019-selfplay", tmp_path, cfg)
    assert r.dialogues.column("dialog_id").to_pylist() == ["selfplay:bot_x:0001"]
    rej = {x["source_file"].split("/")[-1]: x for x in r.rejects.to_pylist()}
    assert set(rej) == {"bot_x.jsonl", "bot_\\udcff.jsonl", "bot_deep.jsonl"}
    assert (rej["bot_x.jsonl"]["record"], rej["bot_x.jsonl"]["field"]) == (2, "chat[0][1]")
    named = rej["bot_\\udcff.jsonl"]
    assert (named["field"], named["dialog_id"]) == ("dialog_id", "selfplay:bot_\\udcff:0001")
    assert "lone surrogate \\udcff" in named["reason"]
    assert rej["bot_deep.jsonl"]["reason"].startswith("JSON nested too deep to parse")


def test_parquet_text_that_is_not_utf8_rejects_its_dialogue(tmp_path, cfg):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path / "evallog"
    d.mkdir()
    (d / "toy_model.jsonl").write_text("\n".join(json.dumps(see_record(a)) for a in ("a1", "a2", "a3")) + "\n")
    r = read("see2019", tmp_path, cfg)
    ExperienceStore(r.dialogues, r.turns, r.rejects).write(tmp_path / "store", {"source": "see2019", "spec": r.spec.model_dump()})
    # Another tool wrote a surrogate's UTF-8-like bytes (not valid UTF-8) into one turn of a2.
    turns = pq.read_table(tmp_path / "store" / "turns.parquet")
    raw = [t.encode() for t in turns.column("text").to_pylist()]
    raw[12 + 5] = b"haha \xed\xa0\xbd"
    text = pa.array(raw, pa.binary()).view(pa.string())
    turns = turns.set_column(turns.schema.get_field_index("text"), turns.schema.field("text"), text)
    pq.write_table(turns, tmp_path / "store" / "turns.parquet")
    back = read("parquet", tmp_path / "store", cfg)
    assert back.dialogues.column("dialog_id").to_pylist() == ["a1", "a3"] and back.turns.num_rows == 24
    (rej,) = back.rejects.to_pylist()
    assert rej == {"source_file": str(tmp_path / "store" / "turns.parquet"), "record": 18, "dialog_id": "a2",
                   "field": "text", "reason": "not valid UTF-8 (byte 0xed at offset 5)"}
    assert back.n_records == 3
