"""The shared contracts and the params loader."""

from __future__ import annotations

import os

import pytest
from enigma.contracts import Agent
from enigma.dialogue import Turn
from enigma.params import Params, ParamsError
from tests.conftest import REPO_ROOT


def test_offline_environment_is_set_by_the_package():
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["DVC_NO_ANALYTICS"] == "1"


def test_turn_rejects_unknown_role():
    assert Turn("user", "hi").role == "user"
    with pytest.raises(ValueError, match="unknown role 'bot'"):
        Turn("bot", "hi")  # type: ignore[arg-type]


def test_agent_protocol_is_structural():
    class Echo:
        def respond(self, history, n=1, seed=None):
            return [history[-1].text] * n

    assert isinstance(Echo(), Agent)
    assert not isinstance(object(), Agent)


def test_params_load_once_validate_every_section_and_name_the_bad_one(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("simulate:\n  seed: 5\n")
    assert Params.load(p).simulate.seed == 5
    assert Params.load(p).with_overrides("simulate", seed=7, preset=None).seed == 7
    p.write_text("simulate:\n  dialogues_per_agent: many\n")
    with pytest.raises(ParamsError, match="section 'simulate'"):
        Params.load(p)
    p.write_text("simulat:\n  seed: 5\n")  # a misspelt section is an error, not ignored
    with pytest.raises(ParamsError, match="section 'simulat'"):
        Params.load(p)


def test_params_errors_name_the_file(tmp_path):
    with pytest.raises(ParamsError, match="not found"):
        Params.load(tmp_path / "nope.yaml")
    assert Params.load(tmp_path / "nope.yaml", missing="defaults") == Params()
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ParamsError, match="bad.yaml: not valid YAML"):
        Params.load(bad)


def test_shared_values_fill_every_section_that_uses_them_unless_it_sets_its_own(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("shared: {embedding_model: mpnet, embedding_cache: vecs, seed: 3}\n"
                 "comparators: {spe: {seed: 9}}\n"
                 "estimators: {enigma: {dice: {preset: exact_nu}}, gda: {base: enigma, dice: {preset: gda}}}\n")
    params = Params.load(p)
    assert params.encode.model == "mpnet" and params.encode.cache.cache_dir == "vecs"
    assert params.comparators.embedding_model == "mpnet" and params.comparators.cache_dir == "vecs"
    assert params.comparators.spe.seed == 9 and params.comparators.critic.seed == 3
    assert params.sample.seed == params.simulate.seed == params.report.seed == 3
    assert params.sample.agents.transcripts.encoder == "mpnet"
    from enigma.estimators import dice_config

    # a variant inherits from its base, key by key
    assert dice_config("gda", params).seed == 3 and dice_config("gda", params).features.encoder_model == "mpnet"
    assert dice_config("gda", params).solver.name == "gda" and dice_config("enigma", params).solver.name == "exact_nu"
    # without an estimators section, ENIGMA on its defaults, with the shared seed too
    assert dice_config("enigma", Params.from_dict({"shared": {"seed": 4}})).seed == 4


def test_a_benchmarks_knowledge_base_applies_where_no_entry_of_the_chain_sets_one():
    from enigma.estimators import dice_config

    airline = "python:enigma.sim.knowledge:airline"
    params = Params.from_dict({"estimators": {
        "enigma": {"dice": {"preset": "gda", "encoder": "frozen"}},
        "studied": {"base": "enigma", "dice": {"knowledge": None}},  # kept as it was studied
        "on-studied": {"base": "studied", "dice": {"seed": 2}},  # inherits that choice
        "own": {"base": "enigma", "dice": {"knowledge": "python:my.base:facts"}},
        "tuned": {"base": "enigma", "dice": {"encoder": "finetune"}},
    }})
    assert dice_config("enigma", params, airline).frozen.knowledge == airline
    assert dice_config("enigma", params).frozen.knowledge is None  # `enigma estimate` runs on no benchmark
    assert dice_config("studied", params, airline).frozen.knowledge is None
    assert dice_config("on-studied", params, airline).frozen.knowledge is None
    assert dice_config("own", params, airline).frozen.knowledge == "python:my.base:facts"
    # an entry that cannot read the benchmark's base says where the base came from
    with pytest.raises(ParamsError, match="(?s)estimators.tuned.dice: .*frozen.*the benchmark's; knowledge: null in the entry"):
        dice_config("tuned", params, airline)


def test_an_estimator_built_for_a_benchmark_reads_its_knowledge_base():
    """What the train stage, the Prefect task and the cost benchmarks run: the repository's
    benchmarks, through enigma.estimators.benchmark_estimator."""
    from enigma.estimators import benchmark_estimator

    params = Params.load(REPO_ROOT / "params.yaml")
    for name in ("airline", "airline-seed1", "see2019"):
        b = params.benchmark(name)
        assert benchmark_estimator(b, "enigma", params).config.frozen.knowledge == params.benchmarks[name].knowledge
    # no benchmark's headline reads a knowledge base (issue 58): the simulator's is a labelled study row
    assert all(b.knowledge is None for b in params.benchmarks.values())
    # an ablation keeps its own choice (the lab's rows too: tests/studies), a comparator is built as anywhere
    airline = params.benchmark("airline")
    assert benchmark_estimator(airline, "enigma-weighted", params).config.frozen.knowledge is None
    assert benchmark_estimator(airline, "experience-mean", params).name == "experience-mean"


def test_the_repository_params_load():
    params = Params.load(REPO_ROOT / "params.yaml")
    assert {"airline", "airline-seed1", "see2019"} <= set(params.benchmarks)
    assert params.with_overrides("simulate", **params.benchmarks["airline-seed1"].source.simulate).seed == 1
    assert params.with_overrides("simulate", **params.benchmarks["airline"].source.simulate).seed == 0
