"""Sampling: output shape, cache reuse, resume after a crash, re-sampling a changed agent,
recorded failures."""

from __future__ import annotations

import os
import time

import pyarrow.parquet as pq
import pytest

from enigma.sampling.sampler import SamplingAborted, run_sampling, sample_targets
from tests.agents import toy_agents as T

ECHO = "python:tests.agents.toy_agents:echo"


def _states_on_disk(cache_dir) -> int:
    """Distinct states in the cache: one call each here (a call covers every occurrence of its state)."""
    return len({h for p in cache_dir.rglob("part-*.parquet") for h in pq.read_table(p).column("state_hash").to_pylist()})


def test_rows_cover_every_agent_turn(tmp_path):
    store = T.tiny_store(n_dialogues=4)
    table = sample_targets(store, ECHO, n_samples=2, seed=3, cache_dir=tmp_path, progress=False)
    agent_turns = [(r["dialog_id"], r["turn_index"]) for r in store.turns.to_pylist() if r["role"] == "agent"]
    assert table.num_rows == 2 * len(agent_turns) == 24
    got = sorted({(d, t) for d, t in zip(table["dialog_id"].to_pylist(), table["turn_index"].to_pylist())})
    assert got == sorted(agent_turns)
    hist = store.histories()
    for row in table.to_pylist():
        assert row["error"] is None and row["seed"] == 3
        prev = hist[row["dialog_id"]][: row["turn_index"]]
        assert row["text"].startswith("re: " + (prev[-1].text if prev else "<start>"))
    assert table.schema.metadata[b"enigma.sampling.spec"] == ECHO.encode()


def test_exclude_agents(tmp_path):
    store = T.tiny_store(n_dialogues=4)
    table = sample_targets(store, ECHO, cache_dir=tmp_path, exclude_agents=["a2"], progress=False)
    assert set(table["dialog_id"].to_pylist()) == {"d0", "d2"}


def test_rerun_makes_no_agent_calls(tmp_path):
    store = T.tiny_store(n_dialogues=6)
    agent = T.CountingAgent()
    T.CountingAgent.calls = 0
    first, s1 = run_sampling(store, "python:tests.agents.toy_agents:counting", agent=agent, n_samples=2,
                             cache_dir=tmp_path, progress=False)
    assert T.CountingAgent.calls == s1.n_called == s1.n_unique_states > 0
    T.CountingAgent.calls = 0
    second, s2 = run_sampling(store, "python:tests.agents.toy_agents:counting", agent=agent, n_samples=2,
                              cache_dir=tmp_path, progress=False)
    assert T.CountingAgent.calls == 0 and s2.n_called == 0 and s2.n_cached == s1.n_unique_states
    assert second.select(["dialog_id", "turn_index", "sample_index", "text"]).equals(
        first.select(["dialog_id", "turn_index", "sample_index", "text"])
    )
    # the file a rerun writes is the same file: DVC hashes it, so how a run went (cache hits,
    # seconds) stays out of it and the stages after sampling are not rerun for nothing
    assert second.equals(first) and second.schema.metadata == first.schema.metadata
    assert b'"n_states"' in first.schema.metadata[b"enigma.sampling.stats"]
    # a new seed is a new sample
    T.CountingAgent.calls = 0
    run_sampling(store, "python:tests.agents.toy_agents:counting", agent=agent, n_samples=2, seed=1,
                 cache_dir=tmp_path, progress=False)
    assert T.CountingAgent.calls == s1.n_unique_states


def test_identical_states_share_one_call(tmp_path):
    # every agent-opened dialogue starts from the empty state
    store = T.tiny_store(n_dialogues=4)
    _, stats = run_sampling(store, ECHO, cache_dir=tmp_path, progress=False)
    assert stats.n_states == 12 and stats.n_unique_states == 11


def test_killed_midway_resumes_without_repeating(tmp_path):
    store = T.tiny_store(n_dialogues=8)
    spec = "python:tests.agents.toy_agents:counting"
    T.CountingAgent.calls = 0
    with pytest.raises(T.Killed):
        run_sampling(store, spec, agent=T.CrashAfter(7), cache_dir=tmp_path, chunk_states=3, progress=False)
    assert T.CountingAgent.calls == 7
    # the 7 answered calls are on disk (two full chunks and the partial one flushed on the way out)
    assert _states_on_disk(tmp_path) == 7
    T.CountingAgent.calls = 0
    table, stats = run_sampling(store, spec, agent=T.CountingAgent(), cache_dir=tmp_path, progress=False)
    assert stats.n_cached == 7 and T.CountingAgent.calls == stats.n_unique_states - 7
    full = sample_targets(store, ECHO, cache_dir=tmp_path / "fresh", progress=False)
    assert table["text"].to_pylist() == full["text"].to_pylist()  # same seeds, same replies


def test_changed_agent_is_resampled(tmp_path):
    store = T.tiny_store(n_dialogues=2)
    mod = tmp_path / "mod_agent_v.py"
    mod.write_text("class A:\n    def respond(self, h, n=1, seed=None):\n        return ['v1'] * n\n\ndef make():\n    return A()\n")
    import importlib
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        t1 = sample_targets(store, "python:mod_agent_v:make", cache_dir=tmp_path / "c", progress=False)
        mod.write_text(mod.read_text().replace("'v1'", "'v2'"))
        # the agent runs in a fresh process of its own each run (sample.agents.python); a later
        # mtime keeps that import from taking the bytecode cached for 'v1' (same size, same second)
        os.utime(mod, (time.time() + 2, time.time() + 2))
        if "mod_agent_v" in sys.modules:  # imported here only where the agent runs in-process
            importlib.reload(sys.modules["mod_agent_v"])
        t2 = sample_targets(store, "python:mod_agent_v:make", cache_dir=tmp_path / "c", progress=False)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("mod_agent_v", None)
    assert set(t1["text"].to_pylist()) == {"v1"} and set(t2["text"].to_pylist()) == {"v2"}
    assert t1["agent_fingerprint"][0] != t2["agent_fingerprint"][0]


def test_failures_are_recorded_and_the_run_continues(tmp_path):
    texts = ["hello", "please FAIL now", "x", "say EMPTY", "y", "SHORT one", "z", "w"]
    store = T.tiny_store(n_dialogues=1, turns_per_dialogue=8, texts=texts)
    table = sample_targets(store, "python:tests.agents.toy_agents:faulty", n_samples=2,
                           cache_dir=tmp_path, progress=False)
    rows = {(r["turn_index"], r["sample_index"]): r for r in table.to_pylist()}
    assert rows[(2, 0)]["error"] == "AgentCallError: server answered garbage" and rows[(2, 1)]["text"] is None
    # an empty reply is the agent's answer (an early checkpoint's), recorded as said
    assert rows[(4, 1)]["error"] is None and rows[(4, 1)]["text"] == "   "
    assert rows[(6, 0)]["error"] is None and "replies" in rows[(6, 1)]["error"]
    assert rows[(0, 0)]["error"] is None and rows[(0, 0)]["text"]


def test_agent_down_stops_the_run_and_keeps_what_was_done(tmp_path):
    store = T.tiny_store(n_dialogues=6)
    with pytest.raises(SamplingAborted, match="connection refused"):
        run_sampling(store, ECHO, agent=T.AlwaysFails(), cache_dir=tmp_path, max_consecutive_errors=3,
                     progress=False)
    assert _states_on_disk(tmp_path) == 3


def test_prepare_gets_the_pending_states_once(tmp_path):
    store = T.tiny_store(n_dialogues=3)
    agent = T.PreparingAgent()
    _, stats = run_sampling(store, ECHO, agent=agent, cache_dir=tmp_path, progress=False)
    assert len(agent.prepared) == 1 and len(agent.prepared[0]) == stats.n_unique_states == agent.calls
    again = T.PreparingAgent()
    run_sampling(store, ECHO, agent=again, cache_dir=tmp_path, progress=False)
    assert again.prepared == [] and again.calls == 0  # nothing pending: no preparation either
