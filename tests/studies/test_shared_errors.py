"""studies/shared_errors.py: which agents every ENIGMA row misjudges alike."""

from __future__ import annotations

import numpy as np

from studies.shared_errors import row_residuals, shared


def _summary(estimates: dict[str, list[float]], truth: list[float]) -> dict:
    agents = {f"a{i}": {"r": {"truth": t, **{n: e[i] for n, e in estimates.items()}}} for i, t in enumerate(truth)}
    return {"ratings": ["r"], "estimators": list(estimates), "agents": agents}


def test_an_error_every_row_makes_is_shared_and_one_rows_own_error_is_not():
    truth = [0.1, 0.3, 0.5, 0.7, 0.9, 1.1]
    # both rows put a1 too high (above a2); only row b puts a4 too low
    a = [0.1, 0.6, 0.5, 0.7, 0.9, 1.1]
    b = [0.1, 0.6, 0.5, 0.7, 0.5, 1.1]
    errors, fitted, slope, t = row_residuals(_summary({"enigma": a, "enigma-b": b}, truth), "r", ["enigma", "enigma-b"])
    flagged = shared(errors, threshold=0.25 * t.std(), agreement=0.9)
    assert list(flagged[flagged].index) == ["a1"]
    # the residual is in the truth's units: a row that halves every estimate has the same errors
    halved, _, slope_h, _ = row_residuals(_summary({"enigma": [x / 2 for x in a]}, truth), "r", ["enigma"])
    assert np.allclose(halved["enigma"], errors["enigma"]) and np.isclose(slope_h["enigma"], slope["enigma"] / 2)
    # with a1 on its row's line, the row ranks the agents as the truth does
    fixed = fitted["enigma"] + slope["enigma"] * errors["enigma"].where(~flagged, 0.0)
    assert list(fixed.sort_values().index) == list(t.sort_values().index)
