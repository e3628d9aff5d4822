"""A benchmark entry of params.yaml: what it must say, and the paths and agents that follow."""

from __future__ import annotations

import pytest

from enigma.params import Params, ParamsError
from tests.pipeline.conftest import AGENT_SPEC, build_store

ENTRY = {"source": {"ingest": "parquet", "path": "raw"}, "rollouts": None, "agent_spec": AGENT_SPEC,
         "estimators": ["experience-mean"], "knowledge": None, "full_estimators": [], "note": None}


def _params(**entry) -> Params:
    return Params.from_dict({"pipeline": {"data_dir": "d"}, "report": {"out_dir": "r"}, "benchmarks": {"b": {**ENTRY, **entry}}})


def test_paths_follow_from_the_name():
    b = _params().benchmark("b")
    assert (str(b.store), str(b.truth), str(b.targets_dir)) == ("d/b/store", "d/b/truth.parquet", "d/b/targets")
    assert (str(b.results_dir()), str(b.results_dir(full=True))) == ("d/b/results", "d/b/results_full")
    assert (str(b.report_dir()), str(b.report_dir(full=True))) == ("r/b", "r/b_full")
    assert b.rollouts is None
    with_rollouts = _params(rollouts={"ingest": "see2019-selfplay"}, agent_spec="transcripts:{rollouts}?agent={agent}").benchmark("b")
    assert with_rollouts.agent_spec("x") == "transcripts:d/b/rollouts?agent=x"
    own_chats = _params(agent_spec="transcripts-onsupport:{store}?agent={agent}&store={store}").benchmark("b")
    assert own_chats.agent_spec("x") == "transcripts-onsupport:d/b/store?agent=x&store=d/b/store"
    with pytest.raises(ValueError, match=r"names \{rollouts\} but the benchmark has none"):
        _params(agent_spec="transcripts:{rollouts}?agent={agent}").benchmark("b").agent_spec("x")


def test_the_full_runs_results_folder_is_a_setting_apart_from_the_other_outputs():
    # the lab's params (studies/params.yaml) write its rows beside, never into, the product's results_full
    lab = Params.from_dict({"pipeline": {"data_dir": "d", "full_results": "results_studies"}, "benchmarks": {"b": ENTRY}})
    assert (str(lab.benchmark("b").results_dir()), str(lab.benchmark("b").results_dir(full=True))) == ("d/b/results", "d/b/results_studies")
    for clash in ("results", "store", "targets", "a/b"):
        with pytest.raises(ParamsError, match="(?s)section 'pipeline'.*full_results"):
            Params.from_dict({"pipeline": {"full_results": clash}})


@pytest.mark.parametrize("change, says", [
    ({"source": {"path": "raw"}}, "exactly one of 'simulate'"),
    ({"source": {"path": "raw", "ingest": "jsonl", "simulate": {}}}, "exactly one of 'simulate'"),
    ({"rollouts": {}}, "exactly one of 'learned_customer' or 'ingest'"),
    ({"full_estimators": ["experience-mean"]}, r"in both 'estimators' and 'full_estimators'"),
    ({"knowledge": "enigma.sim.knowledge:airline"}, "knowledge"),
    ({"knowledge": "python:enigma.sim.knowledge:airline", "agent_spec": "transcripts:{store}?agent={agent}"},
     "retrieval stand-in.*set knowledge: null, or sample.agents.transcripts.sources: true"),
    ({"knowledge": "python:enigma.sim.knowledge:airline", "agent_spec": "transcripts-onsupport:{store}?agent={agent}&store={store}"},
     "retrieval stand-in"),
    ({"source": {"path": "src/enigma/sim", "simulate": {}}, "rollouts": {"ingest": "see2019-selfplay"}}, "the source must be ingest too"),
])
def test_a_bad_entry_is_one_error_that_names_the_section(change, says):
    # stand-ins that do not record their sources (on by default): a knowledge base is refused with them
    unsourced = {"sample": {"agents": {"transcripts": {"sources": False}}}}
    with pytest.raises(ParamsError, match=f"(?s)section 'benchmarks'.*{says}"):
        Params.from_dict({"pipeline": {"data_dir": "d"}, "report": {"out_dir": "r"}, "benchmarks": {"b": {**ENTRY, **change}},
                          **unsourced})


def test_every_key_of_an_entry_is_needed_because_dvc_reads_them():
    entry = dict(ENTRY)
    del entry["note"]
    with pytest.raises(ParamsError, match="(?s)section 'benchmarks'.*note"):
        Params.from_dict({"benchmarks": {"b": entry}})


def test_with_rollouts_only_the_agents_that_have_some_are_held_out(tmp_path):
    from enigma.pipeline.store import heldout_agents
    from enigma.store.experience import ExperienceStore

    params = Params.from_dict({"pipeline": {"data_dir": str(tmp_path)}, "benchmarks": {"b": {**ENTRY, "rollouts": {"ingest": "x"}}}})
    b = params.benchmark("b")
    build_store().write(b.store)
    full = ExperienceStore.open(b.store)
    full.filter_agents(drop={"a5"}).write(b.rollouts)  # a5 (e.g. a human baseline) has no self-play
    assert heldout_agents(b) == (["a1", "a2", "a3", "a4"], ["a5"])


def test_the_store_stage_writes_the_truth_the_report_used_to_compute(tmp_path):
    """Human-data truth went from the report (truth_from_store on the store) to the store stage
    (truth.parquet): the report reads back exactly the same table."""
    from enigma.evaluation.truth import read_truth, truth_from_store
    from enigma.pipeline.store import build_store as run_store_stage
    from enigma.store.experience import ExperienceStore

    build_store().write(tmp_path / "raw")
    params = Params.from_dict({"pipeline": {"data_dir": str(tmp_path / "d")},
                               "benchmarks": {"b": {**ENTRY, "source": {"ingest": "parquet", "path": str(tmp_path / "raw")}}}})
    b = params.benchmark("b")
    run_store_stage(b, params)
    computed = truth_from_store(ExperienceStore.open(b.store))
    read = read_truth(b.truth)
    assert read.drop(columns="n").equals(computed.drop(columns="n")) and list(read.n) == list(computed.n)


def test_a_knowledge_base_with_a_stand_in_that_records_its_sources_is_accepted():
    """With ``sample.agents.transcripts.sources`` the stand-in says where each reply was said, and
    the knowledge block holds the reply to that conversation's customer."""
    entry = {**ENTRY, "knowledge": "python:enigma.sim.knowledge:airline", "agent_spec": "transcripts:{store}?agent={agent}"}
    p = Params.from_dict({"pipeline": {"data_dir": "d"}, "report": {"out_dir": "r"}, "benchmarks": {"b": entry},
                          "sample": {"agents": {"transcripts": {"sources": True}}}})
    assert p.benchmark("b").config.knowledge == "python:enigma.sim.knowledge:airline"


def test_a_check_across_sections_names_its_section():
    with pytest.raises(ParamsError, match="(?s)section 'estimators': .*estimators.a: base 'zz' is not an entry"):
        Params.from_dict({"estimators": {"a": {"base": "zz"}}})
