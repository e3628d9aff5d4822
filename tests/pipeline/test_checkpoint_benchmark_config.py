"""An entry of ``checkpoint_benchmarks`` names a simulator benchmark to be scored on; a wrong one
is one clear error at load time, naming the entry, before any stage trains a model."""

from __future__ import annotations

import pytest

from enigma.params import Params, ParamsError
from tests.pipeline.test_benchmark_config import ENTRY

SIM = {**ENTRY, "source": {"simulate": {}, "path": "src/enigma/sim"}}
LM = {"scored_on": "sim", "lm": {"save_at": [5, 10], "mixes": {"all": {}}}, "estimators": ["enigma"], "note": None}


def load(benchmarks: dict, checkpoint_benchmarks: dict) -> Params:
    return Params.from_dict({"pipeline": {"data_dir": "d"}, "report": {"out_dir": "r"}, "benchmarks": benchmarks,
                             "checkpoint_benchmarks": checkpoint_benchmarks})


def test_paths_follow_the_name_and_the_scored_on_benchmark():
    c = load({"sim": SIM}, {"sim-lm": LM}).checkpoint_benchmark("sim-lm")
    assert (str(c.checkpoints), str(c.record), str(c.truth), str(c.results_dir), str(c.report_dir)) == (
        "d/sim-lm/checkpoints", "d/sim-lm/checkpoints.json", "d/sim-lm/truth.parquet", "d/sim-lm/results", "r/sim-lm")
    assert str(c.scored_on.store) == "d/sim/store" and c.checkpoint_names() == ["all-step00005", "all-step00010"]


@pytest.mark.parametrize("benchmarks, entry, message", [
    ({"sim": SIM}, {**LM, "scored_on": "nope"}, "scored_on 'nope' is not an entry of benchmarks"),
    ({"sim": ENTRY}, LM, "scored_on 'sim' is not a simulator benchmark"),
    ({"sim": SIM}, {**LM, "lm": {"save_at": [0]}}, "save_at"),
    ({"sim": SIM}, {**LM, "threads": 0}, "threads"),
])
def test_a_bad_entry_is_one_error_naming_it(benchmarks, entry, message):
    with pytest.raises(ParamsError, match="checkpoint_benchmarks") as err:
        load(benchmarks, {"sim-lm": entry})
    assert message in str(err.value)


def test_an_entry_may_not_share_a_benchmarks_name():
    with pytest.raises(ParamsError, match="benchmarks has an entry of that name"):
        load({"sim": SIM}, {"sim": LM})
    with pytest.raises(ParamsError, match="checkpoint_benchmarks has no benchmark 'x'"):
        load({"sim": SIM}, {"sim-lm": LM}).checkpoint_benchmark("x")
