"""summary.json shape, the headline sentence, truth tables and the HTML report."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from enigma.evaluation.config import ReportConfig
from enigma.evaluation.errors import EvaluationError
from enigma.evaluation.report import write_report
from enigma.evaluation.split import SplitConfig, split_agents
from enigma.evaluation.summary import INTERVAL_KEYS, PER_RATING_KEYS, SPLIT_KEY, build_summary
from enigma.evaluation.summary_file import read_summary, summary_estimates
from enigma.evaluation.truth import check_truth, read_truth, truth_from_store

FAST = ReportConfig(bootstrap_resamples=100, plots=False)


def _tables(noise: dict[str, float], n_agents: int = 8, ratings=("enjoy", "fluency"), seed: int = 0):
    rng = np.random.default_rng(seed)
    truth, results = [], []
    for i in range(n_agents):
        for r in ratings:
            t = 0.3 + 0.05 * i + (0.1 if r == "fluency" else 0.0)
            truth.append({"agent_id": f"a{i}", "rating": r, "value": t})
            for est, sd in noise.items():
                results.append({"estimator": est, "agent_id": f"a{i}", "rating": r, "estimate": t + rng.normal(0, sd),
                                "regime": "replies-at-logged-states", "labels": json.dumps({"note": est})})
    return pd.DataFrame(results), check_truth(pd.DataFrame(truth))


def test_summary_has_the_issue_shape():
    results, truth = _tables({"enigma": 0.01, "bleu": 0.2})
    s, _ = build_summary(results, truth, "toy", FAST)
    assert {"benchmark", "n_agents", "ratings", "estimators", "agents"} <= set(s)
    assert s["benchmark"] == "toy" and s["n_agents"] == 8 and s["ratings"] == ["enjoy", "fluency"]
    for name in ("enigma", "bleu"):
        e = s["estimators"][name]
        for r in s["ratings"]:
            assert set(e[r]) == set(PER_RATING_KEYS) | set(INTERVAL_KEYS) | {SPLIT_KEY, "verdicts"}
            # 7 other agents cannot make a 95% conformal interval (it takes 19): unbounded, always covers
            assert {k: e[r]["interval_coverage"][k] for k in ("sampling", "conformal")} == {"sampling": None, "conformal": 1.0}
            assert {k: e[r]["interval_mean_width"][k] for k in ("sampling", "conformal")} == {"sampling": None, "conformal": None}
            # the calibrated interval (the default) stays finite with 7 others: a normal prediction interval
            assert 0.0 <= e[r]["interval_coverage"]["calibrated"] <= 1.0 and e[r]["interval_mean_width"]["calibrated"] > 0
            v = e[r]["verdicts"]
            assert set(v) == {"pairs", "called", "wrong", "wrong_rate", "power_gap_0_05"} and v["pairs"] == 28
            for h in ("test", "dev"):
                half = e[r][SPLIT_KEY][h]
                n = len(s["splits"][h])
                assert half["verdicts"]["pairs"] == n * (n - 1) // 2 and "calibrated" in half["interval_coverage"]
            assert len(e[r]["pearson_ci95"]) == 2
        assert isinstance(e["mean_pearson"], float) and isinstance(e["mean_spearman"], float)
        assert e["regime"] == ["replies-at-logged-states"] and e["labels"] == {"note": name}
    # enigma's noise (0.01) is tiny against gaps of 0.05 between neighbours: it calls them, the right way
    v = s["estimators"]["enigma"]["enjoy"]["verdicts"]
    assert v["wrong"] == 0 and v["power_gap_0_05"] > 0.5
    cell = s["agents"]["a3"]["enjoy"]
    assert set(cell) == {"truth", "enigma", "bleu"} and cell["truth"] == pytest.approx(0.45)
    assert s["agents_without_truth"] == []
    extra = results[results.agent_id == "a0"].assign(agent_id="stranger")
    s2, _ = build_summary(pd.concat([results, extra]), truth, "toy", FAST)
    assert s2["agents_without_truth"] == ["stranger"] and "stranger" not in s2["agents"]
    json.dumps(s, allow_nan=False)  # strict JSON: no NaN anywhere
    # read back per estimator, as the scripts that pair a summary's rows do
    back = summary_estimates(s, "enigma")
    wide = results[results.estimator == "enigma"].pivot(index="agent_id", columns="rating", values="estimate")
    pd.testing.assert_frame_equal(back.sort_index(), wide.sort_index(), check_names=False)
    assert summary_estimates(s, "truth").loc["a3", "enjoy"] == pytest.approx(0.45)


def test_headline_says_when_enigma_is_not_the_best():
    results, truth = _tables({"enigma": 0.3, "ridge": 0.01, "bleu": 0.2})
    s, _ = build_summary(results, truth, "toy", FAST)
    assert s["ranking"][0]["estimator"] == "ridge"
    assert "ENIGMA is NOT the best" in s["headline"] and "ridge ranks first" in s["headline"]
    assert s["comparison"]["first_vs_enigma"]["difference"] > 0
    # the table the page leads with: a row per half and for all agents, each saying ENIGMA is not first
    table = s["headline_table"]
    assert [r["half"] for r in table] == ["test", "dev", "all"] and [r["n_agents"] for r in table] == [4, 4, 8]
    assert all(r["rank"] == 3 and r["of"] == 3 and r["first"] == "ridge" and r["best_other"]["estimator"] == "ridge"
               for r in table)
    assert table[2]["enigma"] == {"estimator": "enigma", "value": s["estimators"]["enigma"]["mean_pearson"],
                                  "ci95": s["estimators"]["enigma"]["mean_pearson_ci95"]}
    pair = s["comparison"]["enigma_minus_best_other"]
    assert table[2]["difference"] == {"value": pair["difference"], "ci95": pair["ci95"]} and pair["difference"] < 0
    # ENIGMA minus ridge is ridge minus ENIGMA turned round, on the same resamples
    assert pair["difference"] == pytest.approx(-s["comparison"]["first_vs_enigma"]["difference"])
    assert table[2]["note"].startswith("ENIGMA is not first across all agents: it ranks 3 of 3; ridge ranks first with")
    results, truth = _tables({"enigma": 0.01, "bleu": 0.2})
    s, _ = build_summary(results, truth, "toy", FAST)
    assert "ENIGMA is the best estimator here" in s["headline"] and "ahead of bleu by" in s["headline"]
    assert [(r["rank"], r["best_other"]["estimator"], r["note"]) for r in s["headline_table"]] == [(1, "bleu", None)] * 3


def test_headline_when_only_enigmas_own_settings_rank_above_it():
    """A full report ranks ENIGMA's studied settings beside it; when only those lead, the headline
    says ENIGMA leads the other estimators (paired with the best of them) and how many of its own
    settings rank above it, rather than that it is not the best. One other estimator above it, and
    it is not the best again."""
    results, truth = _tables({"enigma-wide": 0.005, "enigma": 0.05, "ridge": 0.3, "bleu": 0.5})
    s, _ = build_summary(results, truth, "toy", FAST)
    assert [r["estimator"] for r in s["ranking"]] == ["enigma-wide", "enigma", "ridge", "bleu"]
    assert "NOT the best" not in s["headline"]
    assert "ENIGMA is the best estimator here that is not one of its own settings: it ranks 2 of 4" in s["headline"]
    assert "ahead of ridge by" in s["headline"] and "1 of its own settings rank above it; enigma-wide leads by" in s["headline"]
    pair = s["comparison"]["enigma_vs_best_other"]
    assert (pair["first"], pair["other"]) == ("enigma", "ridge") and pair["difference"] > 0
    # the table's row for all agents: the best other estimator is ridge, not enigma-wide, and the
    # sentence under it says that only ENIGMA's own setting ranks above it
    row = s["headline_table"][2]
    assert (row["best_other"]["estimator"], row["rank"], row["first"]) == ("ridge", 2, "enigma-wide")
    assert row["difference"]["value"] == pytest.approx(pair["difference"])
    assert row["note"] == ("ENIGMA is not first across all agents: it ranks 2 of 4, below only its own setting "
                           "enigma-wide; it leads every other estimator.")
    assert s["comparison"]["first_vs_enigma"]["first"] == "enigma-wide"
    results, truth = _tables({"enigma-wide": 0.005, "ridge": 0.01, "enigma": 0.3})
    s, _ = build_summary(results, truth, "toy", FAST)
    assert [r["estimator"] for r in s["ranking"]] == ["enigma-wide", "ridge", "enigma"]
    assert "ENIGMA is NOT the best estimator on this benchmark: it ranks 3 of 3" in s["headline"]
    assert "enigma_vs_best_other" not in s["comparison"]


def test_collapsed_estimator_is_flagged_in_the_summary():
    results, truth = _tables({"enigma": 0.01})
    tw = truth.pivot(index="agent_id", columns="rating", values="value")
    loo = [{"estimator": "loo-mean", "agent_id": a, "rating": r, "estimate": float(tw.drop(a)[r].mean())}
           for a in tw.index for r in tw.columns]
    s, _ = build_summary(pd.concat([results, pd.DataFrame(loo)]), truth, "toy", FAST)
    e = s["estimators"]["loo-mean"]
    assert e["enjoy"]["pearson"] == pytest.approx(-1.0) and e["enjoy"]["spread_ratio"] < 0.2
    assert any("collapse" in f for f in e["flags"])


def test_an_estimator_that_is_mostly_the_leave_one_out_mean_is_flagged():
    """The issue's failure: estimates that are the experience mean (held out per agent) plus a
    little move against the truth. Spread alone does not catch it (here 0.3 of the truth's), the
    Pearson with the leave-one-out mean does; a good estimator is not flagged."""
    results, truth = _tables({"enigma": 0.01}, n_agents=30)
    tw = truth.pivot(index="agent_id", columns="rating", values="value")
    rng = np.random.default_rng(1)
    logs = tw + rng.normal(0, 0.02, tw.shape)  # the logged ratings: the truth plus sampling noise
    rows = []
    for a in tw.index:
        for r in tw.columns:
            loo = float(logs.drop(a)[r].mean())
            rows.append({"estimator": "experience-mean", "agent_id": a, "rating": r, "estimate": loo})
            rows.append({"estimator": "near-mean", "agent_id": a, "rating": r, "estimate": loo + 0.3 * (loo - 0.5) * 30 + rng.normal(0, 0.02)})
    s, _ = build_summary(pd.concat([results, pd.DataFrame(rows)]), truth, "toy", FAST)
    near, good = s["estimators"]["near-mean"], s["estimators"]["enigma"]
    assert near["enjoy"]["spread_ratio"] > 0.2 and not any("collapse" in f for f in near["flags"])
    assert near["enjoy"]["loo_mean_pearson"] > 0.9 and any("leave-one-out mean" in f for f in near["flags"])
    assert good["enjoy"]["loo_mean_pearson"] < -0.9 and not any("leave-one-out mean" in f for f in good["flags"])
    assert "loo_mean_pearson" not in s["estimators"]["experience-mean"]["enjoy"] or s["estimators"]["experience-mean"]["enjoy"]["loo_mean_pearson"] is None
    # the truth here is a line in the agent's index and the logs follow it: the leave-one-out mean is
    # nearly collinear with the truth, so nothing is left for a partial correlation
    assert near["enjoy"]["partial_pearson"] is None


def test_partial_correlation_beyond_the_leave_one_out_mean():
    from enigma.evaluation.correlation import loo_mean_dependence

    rng = np.random.default_rng(0)
    truth = rng.normal(size=40)
    loo = -0.5 * truth + rng.normal(size=40)  # the logs' mean only partly tied to the truth
    knows_more = loo + 2.0 * truth
    only_mean = loo + rng.normal(0, 0.1, 40)
    assert loo_mean_dependence(knows_more, loo, truth)["partial_pearson"] > 0.9
    assert abs(loo_mean_dependence(only_mean, loo, truth)["partial_pearson"]) < 0.4
    assert loo_mean_dependence(only_mean, loo, truth)["loo_mean_pearson"] > 0.9


def test_runs_that_did_not_converge_are_flagged():
    results, truth = _tables({"enigma": 0.01, "bleu": 0.2})
    diag = {"a1": {"all": {"converged": False, "grad_max": 53.0}}, "a4": {"all": {"converged": True}}}
    results["diagnostics"] = [json.dumps(diag.get(a, {"all": {"converged": True}})) if e == "enigma" else None
                              for e, a in zip(results.estimator, results.agent_id)]
    s, _ = build_summary(results, truth, "toy", FAST)
    assert s["estimators"]["enigma"]["not_converged"] == ["a1"] and s["estimators"]["bleu"]["not_converged"] == []
    assert any("did not converge for 1 of 8 agent(s): a1" in f for f in s["estimators"]["enigma"]["flags"])


def test_error_rows_are_reported_not_dropped():
    results, truth = _tables({"enigma": 0.01})
    results.loc[results.agent_id == "a2", "estimate"] = np.nan
    results["error"] = np.where(results.agent_id == "a2", "RuntimeError: boom", None)
    s, _ = build_summary(results, truth, "toy", FAST)
    assert s["errors"] == [{"estimator": "enigma", "agent_id": "a2", "error": "RuntimeError: boom"}]
    assert s["estimators"]["enigma"]["n_agents"] == 7 and s["agents"]["a2"]["enjoy"]["enigma"] is None


def test_truth_reliability_from_standard_errors():
    results, truth = _tables({"enigma": 0.01}, n_agents=6)
    truth["stderr"] = 0.0
    s, _ = build_summary(results, truth, "toy", FAST)
    assert s["truth_reliability"]["enjoy"]["reliability"] == pytest.approx(1.0)
    std = s["truth_reliability"]["enjoy"]["std"]
    truth["stderr"] = std / 2  # noise variance a quarter of the spread
    s, _ = build_summary(results, truth, "toy", FAST)
    assert s["truth_reliability"]["enjoy"]["reliability"] == pytest.approx(0.75)
    assert s["truth_reliability"]["enjoy"]["max_pearson"] == pytest.approx(0.75**0.5)


def test_truth_from_store_is_each_agents_own_mean(store):
    t = truth_from_store(store)
    enjoy = store.dialogues.to_pandas().groupby("agent_id")["rating_enjoy"].mean()
    got = t[t.rating == "enjoy"].set_index("agent_id")["value"]
    assert got.to_dict() == pytest.approx(enjoy.to_dict())
    assert set(t["n"]) == {4}
    with pytest.raises(EvaluationError, match="no rating"):
        truth_from_store(store, ["nope"])


def test_truth_file_errors_name_row_and_field(tmp_path):
    p = tmp_path / "truth.csv"
    pd.DataFrame({"agent_id": ["a", "b"], "rating": ["r", "r"], "value": [0.1, "high"]}).to_csv(p, index=False)
    with pytest.raises(EvaluationError, match=r"truth.csv: row 2: field 'value'"):
        read_truth(p)
    pd.DataFrame({"agent_id": ["a"], "value": [0.1]}).to_csv(p, index=False)
    with pytest.raises(EvaluationError, match=r"missing column\(s\) \['rating'\]"):
        read_truth(p)
    pd.DataFrame({"agent_id": ["a", "a"], "rating": ["r", "r"], "value": [0.1, 0.2]}).to_parquet(tmp_path / "t.parquet")
    with pytest.raises(EvaluationError, match="more than one value"):
        read_truth(tmp_path / "t.parquet")


def test_report_writes_summary_html_and_figures(tmp_path):
    results, truth = _tables({"enigma": 0.05, "bleu": 0.2}, n_agents=5, ratings=("enjoy",))
    curves = pd.DataFrame([{"estimator": "enigma", "agent_id": f"a{i}", "run": "all", "step": s, "estimate_enjoy": 0.4 + i / s}
                           for i in range(5) for s in (10, 20)])
    cfg = ReportConfig(bootstrap_resamples=50, plots=True)
    s = write_report(results, truth, "toy", tmp_path / "toy", cfg, curves=curves, progress=False)
    html = (tmp_path / "toy" / "index.html").read_text()
    # the page leads with the headline table (tests/evaluation/test_eval_report_html.py reads it cell by cell)
    assert '<table class="headline">' in html and "ENIGMA − best other [95% CI, paired]" in html
    assert html.index('<table class="headline">') < html.index("agents, each held out in turn")
    assert "replies at logged states" in html and "note: enigma" in html
    # the headline figures by default: the overview and ENIGMA's (bleu keeps its rows)
    pngs = sorted(p.name for p in (tmp_path / "toy" / "figures").glob("*.png"))
    assert pngs == ["enigma_curves.png", "enigma_error.png", "enigma_vs_truth.png", "overview.png"]
    assert "bleu" in html and "figures/bleu" not in html
    assert read_summary(tmp_path / "toy" / "summary.json")["n_agents"] == 5
    # every estimator's with figures="all", and the same summary
    s_all = write_report(results, truth, "toy", tmp_path / "all", cfg, curves=curves, figures="all", progress=False)
    pngs = sorted(p.name for p in (tmp_path / "all" / "figures").glob("*.png"))
    assert pngs == ["bleu_error.png", "bleu_vs_truth.png", "enigma_curves.png", "enigma_error.png", "enigma_vs_truth.png", "overview.png"]
    assert (tmp_path / "all" / "summary.json").read_text() == (tmp_path / "toy" / "summary.json").read_text()
    assert s_all["headline"] == s["headline"]


def test_the_written_summary_names_each_estimator_once_and_reads_back_value_for_value(tmp_path):
    results, truth = _tables({"enigma": 0.05, "bleu": 0.2}, n_agents=5, ratings=("enjoy", "fun"))
    s = write_report(results, truth, "toy", tmp_path, ReportConfig(bootstrap_resamples=50, plots=False), progress=False)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert "agents" not in on_disk and list(on_disk).index("agent_estimates") == list(s).index("agents")
    assert on_disk["agent_estimates"]["columns"] == ["truth", *s["estimators"]]
    back = read_summary(tmp_path / "summary.json")
    expected = {k: v for k, v in s.items() if k not in ("report_html", "summary_json")}
    assert json.dumps(back) == json.dumps(expected)  # the same keys, in the same order, the same values
    assert summary_estimates(on_disk, "bleu").equals(summary_estimates(s, "bleu"))
    # a row that does not fit its columns is named: file, agent, rating
    on_disk["agent_estimates"]["rows"]["a3"]["fun"].pop()
    (tmp_path / "summary.json").write_text(json.dumps(on_disk))
    with pytest.raises(EvaluationError, match=r"summary.json: agent_estimates.rows\['a3'\]\['fun'\]: expected 3 values"):
        read_summary(tmp_path / "summary.json")
    del on_disk["agent_estimates"]
    (tmp_path / "summary.json").write_text(json.dumps(on_disk))
    with pytest.raises(EvaluationError, match="field 'agent_estimates' .* missing"):
        read_summary(tmp_path / "summary.json")


def test_read_summary_rejects_other_json(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"benchmark": "b"}')
    with pytest.raises(EvaluationError, match="field 'n_agents' missing"):
        read_summary(p)
    p.write_text("{oops")
    with pytest.raises(EvaluationError, match="not valid JSON"):
        read_summary(p)


def test_an_estimator_whose_every_run_failed_still_gives_a_report(tmp_path):
    """Every run of one estimator failed (e.g. a padding error on every held-out agent): the
    report is written with its errors listed, the other estimators scored, and no traceback."""
    results, truth = _tables({"enigma": 0.01, "bleu": 0.2}, n_agents=6)
    failed = results.estimator == "enigma"
    results.loc[failed, "estimate"] = np.nan
    results["error"] = np.where(failed, "PaddingError: dialogue d1 has 40 agent turns", None)
    s = write_report(results, truth, "toy", tmp_path / "toy", ReportConfig(bootstrap_resamples=50, plots=True), progress=False)
    assert len(s["errors"]) == 6 and s["estimators"]["enigma"]["n_agents"] == 0
    assert s["estimators"]["enigma"]["enjoy"]["interval_coverage"] == {"calibrated": None, "sampling": None, "conformal": None}
    assert s["ranking"][0]["estimator"] == "bleu" and "ENIGMA is NOT the best" in s["headline"]
    assert "PaddingError" in (tmp_path / "toy" / "index.html").read_text()


def test_the_split_is_fixed_by_the_ids_even_and_the_test_half_leads():
    """Every agent is in exactly one half, by a rule that reads only its id (and the salt);
    each estimator is scored on each half as it is on all agents, and the headline starts with
    the test half."""
    agents = [f"a{i}" for i in range(27)]
    halves = split_agents(agents)
    assert sorted(halves["test"] + halves["dev"]) == sorted(agents) and {len(halves["test"]), len(halves["dev"])} == {13, 14}
    assert split_agents(reversed(agents)) == halves  # order does not matter
    assert split_agents(agents, SplitConfig(salt="other")) != halves  # the salt does
    assert split_agents(["only"]) == {"test": ["only"], "dev": []}
    assert split_agents(agents, SplitConfig(test_only=["b"]), "b") == {"test": sorted(agents), "dev": []}
    assert split_agents(agents, SplitConfig(test_only=["b"]), "other") == halves
    assert split_agents(agents, SplitConfig(dev_only=["c"]), "c") == {"test": [], "dev": sorted(agents)}
    with pytest.raises(ValueError, match="both test_only and dev_only"):
        SplitConfig(test_only=["c"], dev_only=["c"])

    results, truth = _tables({"enigma": 0.01, "bleu": 0.2}, n_agents=12)
    # bleu is good on the test half only: the halves must be scored apart
    halves = split_agents([f"a{i}" for i in range(12)])
    dev = results.agent_id.isin(halves["dev"]) & (results.estimator == "bleu")
    results.loc[dev, "estimate"] = np.random.default_rng(1).uniform(0, 1, dev.sum())
    s, scores = build_summary(results, truth, "toy", FAST)
    assert s["splits"] == halves
    for name in ("enigma", "bleu"):
        e = s["estimators"][name]
        for h in ("test", "dev"):
            wide = results[(results.estimator == name) & results.agent_id.isin(halves[h])].pivot(
                index="agent_id", columns="rating", values="estimate")
            t = truth[truth.agent_id.isin(halves[h])].pivot(index="agent_id", columns="rating", values="value")
            want = np.mean([np.corrcoef(wide[r], t.loc[wide.index, r])[0, 1] for r in ("enjoy", "fluency")])
            assert e[SPLIT_KEY][h]["mean_pearson"] == pytest.approx(want)
            assert e[SPLIT_KEY][h]["n_agents"] == len(halves[h])
            assert e["enjoy"][SPLIT_KEY][h]["pearson"] == pytest.approx(
                np.corrcoef(wide["enjoy"], t.loc[wide.index, "enjoy"])[0, 1])
    assert s["estimators"]["bleu"][SPLIT_KEY]["test"]["mean_pearson"] > 0.8 > 0.5 > s["estimators"]["bleu"][SPLIT_KEY]["dev"]["mean_pearson"]
    assert [x["estimator"] for x in s["split_ranking"]["test"]] == ["enigma", "bleu"]
    assert s["headline"].startswith(f"Test half ({len(halves['test'])} agents") and "Dev half" in s["headline"]
    assert [(r["half"], r["n_agents"], r["rank"]) for r in s["headline_table"]] == [
        ("test", len(halves["test"]), 1), ("dev", len(halves["dev"]), 1), ("all", 12, 1)]
