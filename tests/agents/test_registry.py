from __future__ import annotations

import json

import pytest

from enigma.agents.registry import RegistryError, SeenAgents, read_registry


def test_yaml_registry_mapping_and_list(tmp_path):
    f = tmp_path / "agents.yaml"
    f.write_text("agents:\n  b: python:m:b\n  a: 'python:m:a '\n")
    agents = read_registry(f)
    assert [(a.name, a.spec) for a in agents] == [("a", "python:m:a"), ("b", "python:m:b")]
    f.write_text("agents:\n  - {name: a, spec: 'python:m:a'}\n")
    assert [a.name for a in read_registry(f)] == ["a"]
    f.write_text("")
    assert read_registry(f) == []


@pytest.mark.parametrize(
    "text, match",
    [
        ("agents:\n  - {name: a, spec: x}\n  - {name: a, spec: y}\n", r"agents\[1\]: agent name 'a' appears twice"),
        ("agents:\n  'bad name': python:m:a\n", r"agents.bad name: field 'name'"),
        ("agents:\n  a: ''\n", r"agents.a: field 'spec'"),
        ("agents:\n  - {name: a}\n", r"agents\[0\]: expected a mapping with exactly 'name' and 'spec'"),
        ("[1, 2]\n", "expected a mapping with key 'agents'"),
        ("agents: [\n", "not valid YAML"),
    ],
)
def test_yaml_registry_errors_name_file_and_entry(tmp_path, text, match):
    f = tmp_path / "agents.yaml"
    f.write_text(text)
    with pytest.raises(RegistryError, match=match) as e:
        read_registry(f)
    assert str(f) in str(e.value)


def test_missing_registry(tmp_path):
    with pytest.raises(RegistryError, match="agents registry not found"):
        read_registry(tmp_path / "nope.yaml")


def test_folder_registry_fingerprint_follows_checkpoint(tmp_path):
    (tmp_path / "ckpt-1").mkdir()
    (tmp_path / "ckpt-1" / "model.bin").write_bytes(b"abc")
    (tmp_path / "ckpt-2.gguf").write_bytes(b"x")
    (tmp_path / ".partial").write_bytes(b"")
    agents = read_registry(tmp_path, checkpoint_spec="hf:{path}")
    assert [a.name for a in agents] == ["ckpt-1", "ckpt-2"]
    assert agents[0].spec == f"hf:{(tmp_path / 'ckpt-1').resolve()}"
    before = agents[0].fingerprint
    (tmp_path / "ckpt-1" / "model.bin").write_bytes(b"abcd")  # a retrained checkpoint, same name
    assert read_registry(tmp_path)[0].fingerprint != before
    with pytest.raises(RegistryError, match="must contain"):
        read_registry(tmp_path, checkpoint_spec="hf:fixed")


def test_seen_agents_roundtrip_and_new_fingerprint(tmp_path):
    f = tmp_path / "agents.yaml"
    f.write_text("agents:\n  a: python:m:a\n  b: python:m:b\n")
    seen = SeenAgents(tmp_path / "state" / "seen.json")
    agents = read_registry(f)
    assert seen.unseen(agents) == agents
    seen.mark(agents[0], run="r1")
    seen.save()
    again = SeenAgents(tmp_path / "state" / "seen.json")
    assert [a.name for a in again.unseen(agents)] == ["b"]
    f.write_text("agents:\n  a: python:m:a_v2\n  b: python:m:b\n")  # same name, new spec
    assert [a.name for a in again.unseen(read_registry(f))] == ["a", "b"]
    assert not any(p.suffix == ".tmp" for p in (tmp_path / "state").iterdir())


def test_seen_agents_corrupt_file(tmp_path):
    f = tmp_path / "seen.json"
    f.write_text("{not json")
    with pytest.raises(RegistryError, match="seen.json: not valid JSON"):
        SeenAgents(f)
    f.write_text(json.dumps({"agents": {"a": {"when": 1}}}))
    with pytest.raises(RegistryError, match="agents.a: field 'fingerprint'"):
        SeenAgents(f)
