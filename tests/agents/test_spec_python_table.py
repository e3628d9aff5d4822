"""Spec parsing, the python and table kinds, fingerprints."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from enigma.agents import AgentCallError, AgentSpecError, fingerprint, load_agent, parse_spec
from enigma.contracts import Agent
from enigma.dialogue import Turn
from enigma.sampling.sampler import sample_targets
from tests.agents import toy_agents as T


@pytest.mark.parametrize(
    "spec, kind, target, model, options",
    [
        ("python:enigma.sim.sellers:s1", "python", "enigma.sim.sellers:s1", None, {}),
        ("hf:/models/x", "hf", "/models/x", None, {}),
        ("openai:http://127.0.0.1:8000/v1/#my-model", "openai", "http://127.0.0.1:8000/v1", "my-model", {}),
        ("transcripts:data/sp?agent=greedy", "transcripts", "data/sp", None, {"agent": "greedy"}),
        ("transcripts-onsupport:data/sp?agent=g&store=data/s", "transcripts-onsupport", "data/sp", None,
         {"agent": "g", "store": "data/s"}),
        ("table:replies.parquet", "table", "replies.parquet", None, {}),
    ],
)
def test_parse(spec, kind, target, model, options):
    s = parse_spec(spec)
    assert (s.kind, s.target, s.model, s.options) == (kind, target, model, options)


@pytest.mark.parametrize(
    "spec, match",
    [
        ("", "empty"),
        ("gpt:foo", "unknown kind 'gpt'"),
        ("nocolon", "unknown kind"),
        ("python:modonly", "python:<module>:<factory>"),
        ("python:mod:not-ident", "python:<module>:<factory>"),
        ("openai:http://x/v1", "openai:<base-url>#<model>"),
        ("openai:ftp://x#m", "must start with http"),
        ("transcripts:p?agnt=x", "unknown option 'agnt'"),
        ("transcripts:p?agent=", "option 'agent' is empty"),
        ("table:", "nothing after"),
    ],
)
def test_bad_specs(spec, match):
    with pytest.raises(AgentSpecError, match=match):
        parse_spec(spec)


def test_python_kind():
    agent = load_agent("python:tests.agents.toy_agents:echo")
    assert isinstance(agent, Agent)
    assert agent.respond([Turn("user", "hi")], n=2, seed=1)[0].startswith("re: hi")
    with pytest.raises(AgentSpecError, match="cannot import module 'no_such_mod'"):
        load_agent("python:no_such_mod:make")
    with pytest.raises(AgentSpecError, match="has no callable 'nope'"):
        load_agent("python:tests.agents.toy_agents:nope")
    with pytest.raises(AgentSpecError, match="no respond"):
        load_agent("python:tests.agents.toy_agents:not_an_agent")
    with pytest.raises(AgentSpecError, match="no arguments"):
        load_agent("python:tests.agents.toy_agents:tiny_store_needs_args")


def test_python_fingerprint_is_stable_and_names_the_factory():
    a = fingerprint("python:tests.agents.toy_agents:echo", load_agent("python:tests.agents.toy_agents:echo"))
    b = fingerprint("python:tests.agents.toy_agents:echo", load_agent("python:tests.agents.toy_agents:echo"))
    c = fingerprint("python:tests.agents.toy_agents:counting", load_agent("python:tests.agents.toy_agents:counting"))
    assert a == b != c and len(a) == 16


def _write(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_table_kind_replays_a_sampling_output(tmp_path):
    store = T.tiny_store(n_dialogues=3)
    sampled = sample_targets(store, "python:tests.agents.toy_agents:echo", n_samples=2, cache_dir=tmp_path / "c",
                             progress=False)
    pq.write_table(sampled, tmp_path / "replies.parquet")
    replay = sample_targets(store, f"table:{tmp_path / 'replies.parquet'}", n_samples=2, cache_dir=tmp_path / "c",
                            progress=False)
    assert replay["text"].to_pylist() == sampled["text"].to_pylist()
    agent = load_agent(f"table:{tmp_path / 'replies.parquet'}")
    hist = store.histories()["d1"]
    assert agent.respond(hist[:1], n=2) == [t for d, ti, t in zip(sampled["dialog_id"].to_pylist(),
                                                                  sampled["turn_index"].to_pylist(),
                                                                  sampled["text"].to_pylist()) if (d, ti) == ("d1", 1)]
    with pytest.raises(AgentCallError, match="holds 2 repl"):
        agent.respond_at("d1", 1, hist[:1], n=3)
    with pytest.raises(AgentCallError, match="no reply for dialog 'zz'"):
        agent.respond_at("zz", 1, [], n=1)


def test_table_without_a_state_is_a_recorded_failure(tmp_path):
    store = T.tiny_store(n_dialogues=1)
    path = _write(tmp_path / "t.parquet", [{"dialog_id": "d0", "turn_index": 0, "text": "hello"}])
    table = sample_targets(store, f"table:{path}", cache_dir=tmp_path / "c", progress=False)
    errors = table["error"].to_pylist()
    assert errors[0] is None and table["text"][0].as_py() == "hello"
    assert all("no reply for dialog 'd0'" in e for e in errors[1:])


def test_bad_tables(tmp_path):
    with pytest.raises(AgentSpecError, match="not found"):
        load_agent(f"table:{tmp_path / 'none.parquet'}")
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(AgentSpecError, match="not a readable Parquet"):
        load_agent(f"table:{tmp_path / 'junk.parquet'}")
    p = _write(tmp_path / "a.parquet", [{"dialog_id": "d0", "text": "x"}])
    with pytest.raises(AgentSpecError, match=r"missing column\(s\) \['turn_index'\]"):
        load_agent(f"table:{p}")
    p = _write(tmp_path / "b.parquet", [{"dialog_id": "d0", "turn_index": 0, "text": "x"},
                                        {"dialog_id": "d0", "turn_index": 2, "text": "  "}])
    with pytest.raises(AgentSpecError, match=r"b.parquet: row 2: field 'text' is empty"):
        load_agent(f"table:{p}")
    p = _write(tmp_path / "c.parquet", [{"dialog_id": "d0", "turn_index": 0, "sample_index": 0, "text": "x"},
                                        {"dialog_id": "d0", "turn_index": 0, "sample_index": 0, "text": "y"}])
    with pytest.raises(AgentSpecError, match="row 2: duplicate reply"):
        load_agent(f"table:{p}")
