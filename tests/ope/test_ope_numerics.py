"""ENIGMA's numbers are versioned (``enigma.ope.estimator.NUMERICS``): saved leave-one-agent-out
results are reused while the settings are unchanged, so a code change that moves the numbers
without a bump would leave reports made by the old code beside the new. These are the numbers of
the current version on a small tabular case, through params.yaml's settings of the report rows
that run different code (the solver with its interval and the fitted-Q-evaluation Q, the linear Q, the paper's
weighted value, gradient descent-ascent). A change that moves any of them fails here, and the
failure says what to do.

Regenerate after a deliberate change (and bump NUMERICS):
    .venv/bin/python tests/ope/test_ope_numerics.py
A change of params.yaml's settings for these rows moves them too: regenerate, with no bump, since a
saved result's fingerprint already holds every setting (2026-11-29: fqe.history and kkt refits;
later that day: dr_zeta_cap 1; 2026-12-02: the clip not applied on one-hot features).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from enigma.contracts import HeldOutAgent
from enigma.estimators import dice_config
from enigma.ope import EnigmaEstimator
from enigma.ope.estimator import NUMERICS
from enigma.ope.tabular import reference_problem, target_actions
from enigma.params import Params, load_yaml

PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"
# The linear Q (q_model lstd) is the product's code but its row is the lab's now (studies/params.yaml,
# enigma-lstd): its settings as that row has them, so the numbers below stay pinned
# (tests/studies/test_studies_params.py checks the lab's row is still this one).
LAB_ROWS = {"enigma-lstd": {"base": "enigma", "dice": {"q_model": "lstd", "reply_measures": False, "grounding": False,
                                                       "knowledge": None, "fqe": {"agreement": False}, "interval_resamples": 0}}}
# report row -> overrides that keep the case small; the rest is params.yaml's
CASES = {
    "enigma": {"interval_resamples": 20, "fqe": {"agreement": False, "epochs": 5, "history": True}},
    "enigma-lstd": {"interval_resamples": 20},
    "enigma-weighted": {},
    "enigma-gda": {"steps": 60},
}
# NUMERICS -> case -> rating -> [estimate, interval low, interval high] (None: no interval)
GOLDEN: dict[int, dict[str, dict[str, list[float | None]]]] = {
    1: {
        "enigma": {"match": [0.2753206743689647, 0.19648972941975154, 0.42641804870024064],
                   "short": [0.43628474941331363, 0.370281808647432, 0.5264672805920718]},
        "enigma-lstd": {"match": [0.2645539788647623, 0.1645932959668983, 0.4754324775876821],
                   "short": [0.4321271438428487, 0.3423470335143201, 0.5232654758447062]},
        "enigma-gda": {"match": [0.3441154749637786, None, None],
                   "short": [0.42378992661613424, None, None]},
        "enigma-weighted": {"match": [0.2570841824085226, None, None],
                   "short": [0.4407535076948622, None, None]},
    },
}


def numbers(case: str) -> dict[str, list[float | None]]:
    torch.set_num_threads(1)
    problem = reference_problem()
    store = problem.logs(600, seed=3)
    data = load_yaml(PARAMS)
    data["estimators"].update(LAB_ROWS)
    cfg = dice_config(case, Params.from_dict(data, PARAMS))
    cfg = cfg.with_flat(encoder="onehot", device="cpu", seed=3, **CASES[case])
    target = HeldOutAgent("soft", target_actions=target_actions(store, problem.targets["soft"], 1, seed=3))
    out = EnigmaEstimator(cfg, progress=False).estimate_full(store, target)
    return {r: [e["estimate"], *(out.intervals.get(r) or (None, None))] for r, e in out.estimates.items()}


def test_the_numerics_version_has_its_numbers():
    assert NUMERICS in GOLDEN, f"NUMERICS {NUMERICS} has no recorded numbers: run {Path(__file__).name} as a script and paste its output"


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_numbers_are_those_of_the_numerics_version(case):
    got = numbers(case)
    want = GOLDEN[NUMERICS][case]
    for rating, values in want.items():
        for g, w in zip(got[rating], values):
            assert (g is None) == (w is None) and (w is None or abs(g - w) < 1e-6), (
                f"{case} / {rating}: {got[rating]} where numerics version {NUMERICS} gave {values}. If the change is meant, "
                f"bump enigma.ope.estimator.NUMERICS (saved results are recomputed then) and record the new numbers "
                f"(run this file as a script)")


if __name__ == "__main__":
    print(json.dumps({NUMERICS: {c: numbers(c) for c in sorted(CASES)}}, indent=1))
