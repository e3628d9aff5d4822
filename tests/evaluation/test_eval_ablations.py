"""ENIGMA without post-normalisation, derived from the same run's result rows."""

from __future__ import annotations

import json

import pandas as pd

from enigma.evaluation.ablations import UNNORMALISED_LABEL, with_unnormalised
from enigma.evaluation.results import RESULT_COLUMNS, check_results
from enigma.evaluation.summary import build_summary


def rows(estimator, values, unnormalised, error=None):
    return [
        {"estimator": estimator, "agent_id": f"a{i}", "rating": "reward", "estimate": v, "unnormalised": u,
         "regime": "replies-at-logged-states", "labels": json.dumps({"note": "x"}), "error": error}
        for i, (v, u) in enumerate(zip(values, unnormalised))
    ]


def table(*parts):
    return check_results(pd.DataFrame([r for p in parts for r in p]))


def test_unnormalised_rows_become_an_estimator_with_its_regime_and_label():
    res = table(rows("enigma", [0.5, 0.7, 0.9], [0.2, 0.4, 0.3]), rows("bleu", [0.1, 0.2, 0.3], [None] * 3))
    out = with_unnormalised(res)
    derived = out[out.estimator == "enigma-unnormalised"].sort_values("agent_id")
    assert list(derived.estimate) == [0.2, 0.4, 0.3]
    assert set(derived.regime) == {"replies-at-logged-states"}
    assert json.loads(derived.labels.iloc[0]) == {"note": "x", "ablation": UNNORMALISED_LABEL}
    assert "bleu-unnormalised" not in set(out.estimator)
    assert list(out.columns) == RESULT_COLUMNS
    truth = pd.DataFrame({"agent_id": ["a0", "a1", "a2"], "rating": "reward", "value": [0.1, 0.5, 0.3],
                          "stderr": 0.0, "n": 1})
    summary, _ = build_summary(check_results(out), truth, "t")
    assert summary["estimators"]["enigma-unnormalised"]["regime"] == ["replies-at-logged-states"]
    assert summary["estimators"]["enigma-unnormalised"]["reward"]["pearson"] > 0.99  # truth = 2 * estimate - 0.3


def test_nothing_to_derive_leaves_results_alone():
    res = table(rows("bleu", [0.1, 0.2], [None, None]))
    assert with_unnormalised(res) is res
    already = table(rows("enigma", [0.5], [0.2]), rows("enigma-unnormalised", [0.3], [0.3]))
    assert len(with_unnormalised(already)) == 2


def test_a_missing_value_is_an_error_row_not_a_silent_gap():
    res = table(rows("enigma", [0.5, 0.6], [0.2, None]))
    out = with_unnormalised(res)
    bad = out[(out.estimator == "enigma-unnormalised") & (out.agent_id == "a1")].iloc[0]
    assert pd.isna(bad.estimate) and "no unnormalised estimate" in bad.error
    check_results(out)  # a NaN estimate with its error recorded is valid
