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
later that day: dr_zeta_cap 1).
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
        "enigma": {"match": [0.31178403789735554, 0.2826779370385164, 0.40675848792926483],
                   "short": [0.47146769617972856, 0.459538568639347, 0.5862772443692014]},
        "enigma-lstd": {"match": [0.3062234698660939, 0.25789187648426387, 0.39228120663499955],
                        "short": [0.47314484584238503, 0.39765005268392695, 0.533445127778109]},
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
