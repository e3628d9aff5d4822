"""The small language model of the checkpoint benchmarks (``enigma.lm``): its data mixes, its
training examples (prompted exactly as ``HFAgent`` prompts a checkpoint), and a build that saves
checkpoints a user loads as ``hf:<dir>`` and resumes without training again."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from enigma.agents.config import HFSettings
from enigma.agents.hf import HFAgent
from enigma.lm.config import LMConfig, MixConfig
from enigma.lm.corpus import examples, mix, top_agents
from enigma.lm.train import encode
from enigma.pipeline.checkpoints import build_checkpoints
from tests.pipeline.conftest import build_store

TINY = dict(vocab_size=300, n_layer=1, n_embd=16, n_head=2, max_tokens=96, batch_size=2, warmup_steps=1)


def test_examples_are_every_agent_turn_with_the_turns_before_it():
    store = build_store(n_agents=3, per_agent=2)
    ex = examples(store)
    assert len(ex) == sum(r == "agent" for r in store.turns.column("role").to_pylist())
    first = ex[0]
    assert [t.role for t in first.history] == ["user"] and first.reply == "w" and first.agent_id == "a1"
    assert [t.text for t in ex[1].history][-1] == "and then"


def test_mixes_keep_the_better_agents_or_swap_replies_seeded():
    store = build_store(n_agents=4, per_agent=3)  # reward grows with the agent's number
    assert top_agents(store, "reward", 0.5) == {"a3", "a4"}
    better = mix(store, MixConfig(top_share=0.5), seed=0)
    assert {e.agent_id for e in better} == {"a3", "a4"}
    noisy = mix(store, MixConfig(swap_share=1.0), seed=0)
    every = examples(store)
    assert [e.history for e in noisy] == [e.history for e in every]
    assert sum(n.reply != e.reply for n, e in zip(noisy, every)) > len(every) // 2  # swapped, some by chance kept
    assert mix(store, MixConfig(swap_share=0.5), seed=3) == mix(store, MixConfig(swap_share=0.5), seed=3)
    with pytest.raises(ValueError, match="rating 'fun' is not in the store"):
        mix(store, MixConfig(top_share=0.5, rating="fun"), seed=0)


@pytest.mark.parametrize("bad, message", [
    ({"n_embd": 30, "n_head": 4}, "not a multiple"),
    ({"save_at": [5, 3]}, "increasing"),
    ({"mixes": {}}, "at least one data mix"),
])
def test_config_rejects(bad, message):
    with pytest.raises(ValidationError, match=message):
        LMConfig(**{**TINY, **bad})


def test_checkpoints_load_as_hf_agents_prompted_as_trained_and_a_build_resumes(tmp_path):
    store = build_store(n_agents=3, per_agent=4)
    store.write(tmp_path / "store")
    cfg = LMConfig(**TINY, save_at=[1, 3], mixes={"all": MixConfig(), "noisy": MixConfig(swap_share=0.5)})
    said: list[str] = []
    out = build_checkpoints(tmp_path / "store", tmp_path / "ckpt", tmp_path / "record.json", cfg, threads=1, say=said.append)
    assert out["checkpoints"] == ["all-step00001", "all-step00003", "noisy-step00001", "noisy-step00003"]
    record = json.loads((tmp_path / "record.json").read_text())
    assert {n: (r["mix"], r["step"]) for n, r in record.items()} == {
        "all-step00001": ("all", 1), "all-step00003": ("all", 3), "noisy-step00001": ("noisy", 1), "noisy-step00003": ("noisy", 3)}
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == sorted(record)  # a registry folder: checkpoints only
    agent = HFAgent(tmp_path / "ckpt" / "all-step00003", HFSettings(max_new_tokens=4, max_history_turns=8, device="cpu"))
    ex = examples(store)[1]
    ids, start = encode(agent.tokenizer, ex, cfg)
    assert ids[:start] == agent._prompt_ids(list(ex.history))  # trained on the prompt it is sampled with
    assert ids[-1] == agent.tokenizer.eos_token_id
    assert isinstance(agent.respond(list(ex.history), n=1, seed=0)[0], str)
    # a second build trains nothing: every checkpoint is saved
    said.clear()
    build_checkpoints(tmp_path / "store", tmp_path / "ckpt", tmp_path / "record.json", cfg, threads=1, say=said.append)
    assert said == ["all: 2 checkpoints already saved", "noisy: 2 checkpoints already saved"]


def test_mixes_trained_side_by_side_in_processes_give_the_same_bits_and_a_lost_mix_is_retrained(tmp_path):
    build_store(n_agents=3, per_agent=4).write(tmp_path / "store")
    cfg = LMConfig(**TINY, save_at=[2], mixes={"all": MixConfig(), "better": MixConfig(top_share=0.5)})
    build_checkpoints(tmp_path / "store", tmp_path / "one", tmp_path / "one.json", cfg, threads=1, workers=1)
    build_checkpoints(tmp_path / "store", tmp_path / "two", tmp_path / "two.json", cfg, threads=1, workers=2)
    assert (tmp_path / "one.json").read_bytes() == (tmp_path / "two.json").read_bytes()
    for name in ["all-step00002", "better-step00002"]:
        for f in ["model.safetensors", "tokenizer.json"]:
            assert (tmp_path / "one" / name / f).read_bytes() == (tmp_path / "two" / name / f).read_bytes(), (name, f)
    # a mix whose checkpoint went missing is trained again, alone, to the same bits
    before = (tmp_path / "two" / "better-step00002" / "model.safetensors").read_bytes()
    import shutil

    shutil.rmtree(tmp_path / "two" / "better-step00002")
    said: list[str] = []
    build_checkpoints(tmp_path / "store", tmp_path / "two", tmp_path / "two.json", cfg, threads=1, workers=2,
                      say=said.append)
    assert said == ["all: 1 checkpoints already saved"]
    assert (tmp_path / "two" / "better-step00002" / "model.safetensors").read_bytes() == before
