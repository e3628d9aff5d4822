"""``extends: <path>`` in a parameters file: the extended file's mapping with this one's merged in
(mappings key by key, lists and scalars replaced), relative to the file, chains allowed, circles
and missing files refused naming the file. studies/params.yaml extends the product's this way."""

from __future__ import annotations

import pytest

from enigma.params import Params, ParamsError, load_yaml, merge


def test_mappings_merge_key_by_key_and_everything_else_is_replaced():
    base = {"a": {"x": 1, "y": {"p": 1, "q": 2}, "l": [1, 2]}, "b": 3, "c": "s"}
    over = {"a": {"y": {"q": 20}, "l": [9], "z": None}, "c": None, "d": {"n": 1}}
    assert merge(base, over) == {"a": {"x": 1, "y": {"p": 1, "q": 20}, "l": [9], "z": None}, "b": 3, "c": None, "d": {"n": 1}}
    assert base == {"a": {"x": 1, "y": {"p": 1, "q": 2}, "l": [1, 2]}, "b": 3, "c": "s"}  # neither input changed
    # a mapping over a scalar (or a scalar over a mapping) replaces it whole
    assert merge({"a": 1}, {"a": {"k": 1}}) == {"a": {"k": 1}} and merge({"a": {"k": 1}}, {"a": 2}) == {"a": 2}


def test_the_path_is_relative_to_the_file_and_chains_resolve_in_order(tmp_path):
    (tmp_path / "lab" / "deeper").mkdir(parents=True)
    (tmp_path / "params.yaml").write_text("shared: {seed: 1, embedding_model: minilm}\nreport: {out_dir: reports, plots: true}\n")
    (tmp_path / "lab" / "params.yaml").write_text("extends: ../params.yaml\nreport: {out_dir: lab/reports}\nshared: {seed: 2}\n")
    (tmp_path / "lab" / "deeper" / "p.yaml").write_text("extends: ../params.yaml\nshared: {seed: 3}\n")
    data = load_yaml(tmp_path / "lab" / "deeper" / "p.yaml")
    assert "extends" not in data
    assert data == {"shared": {"seed": 3, "embedding_model": "minilm"}, "report": {"out_dir": "lab/reports", "plots": True}}
    p = Params.load(tmp_path / "lab" / "params.yaml")
    assert (p.shared.seed, str(p.report.out_dir), p.report.plots) == (2, "lab/reports", True)


def test_an_entry_can_take_its_base_from_the_extended_file(tmp_path):
    (tmp_path / "params.yaml").write_text("estimators:\n  enigma: {dice: {preset: exact_nu, steps: 7}}\n"
                                          "pipeline: {data_dir: d}\n")
    (tmp_path / "lab.yaml").write_text("extends: params.yaml\nestimators:\n  enigma-long: {base: enigma, dice: {steps: 70}}\n"
                                       "pipeline: {full_results: results_lab}\n")
    p = Params.load(tmp_path / "lab.yaml")
    assert set(p.estimators) == {"enigma", "enigma-long"} and p.estimators["enigma"].dice["steps"] == 7
    assert str(p.pipeline.data_dir) == "d" and p.pipeline.full_results == "results_lab"


@pytest.mark.parametrize("files, start, says", [
    ({"a.yaml": "extends: a.yaml\n"}, "a.yaml", r"a\.yaml: extends: a\.yaml goes round in a circle"),
    ({"a.yaml": "extends: b.yaml\n", "b.yaml": "extends: a.yaml\n"}, "a.yaml", r"b\.yaml: extends: a\.yaml goes round in a circle"),
    ({"a.yaml": "extends: nope.yaml\n"}, "a.yaml", r"a\.yaml: extends: .*nope\.yaml: parameters file not found"),
    ({"a.yaml": "extends: [b.yaml]\n"}, "a.yaml", r"a\.yaml: extends: expected the path of another parameters file"),
    ({"a.yaml": "extends: b.yaml\n", "b.yaml": "- not a mapping\n"}, "a.yaml", r"b\.yaml: expected a mapping"),
])
def test_circles_missing_files_and_bad_values_are_errors_that_name_the_file(tmp_path, files, start, says):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ParamsError, match=says):
        Params.load(tmp_path / start)


def test_a_bad_value_after_the_merge_names_the_extending_file(tmp_path):
    (tmp_path / "params.yaml").write_text("pipeline: {data_dir: data}\n")
    (tmp_path / "lab.yaml").write_text("extends: params.yaml\npipeline: {full_results: results}\n")
    with pytest.raises(ParamsError, match=r"(?s)lab\.yaml: section 'pipeline'.*full_results: 'results' is another output"):
        Params.load(tmp_path / "lab.yaml")


def test_enigma_estimate_with_an_extending_params_file_runs_the_merged_settings(tmp_path, monkeypatch):
    """Through the command a user runs: ``--params lab.yaml``, which extends the repository's
    params.yaml and changes one ENIGMA setting, records that setting and every other one as the
    repository's file has it (about 10 s on the tabular problem)."""
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    from enigma.cli import app
    from enigma.estimators import dice_config
    from enigma.ope.tabular import reference_problem, write_jsonl

    repo = Path(__file__).resolve().parents[1]
    (tmp_path / "lab.yaml").write_text(f"extends: {repo / 'params.yaml'}\n"
                                       "estimators:\n  enigma:\n    dice: {interval_resamples: 0}\n")
    write_jsonl(reference_problem().logs(200, seed=0), tmp_path / "logs.jsonl")
    monkeypatch.chdir(tmp_path)
    run = CliRunner().invoke
    assert run(app, ["ingest", "jsonl", "logs.jsonl", "--out", "store", "--scale", "match=0:1", "--scale", "short=0:1",
                     "--no-progress"]).exit_code == 0
    r = run(app, ["estimate", "-e", "store", "-t", "steady=python:enigma.ope.tabular:steady", "--encoder", "onehot",
                  "-o", "out", "--cache-dir", "cache", "--no-progress", "--params", "lab.yaml"])
    assert r.exit_code in (0, 3), r.output
    recorded = json.loads((tmp_path / "out" / "estimates.json").read_text())["diagnostics"]["steady"]["config"]
    product = Params.load(repo / "params.yaml")
    entry = product.estimators["enigma"]
    expected = dice_config("enigma", product.model_copy(update={"estimators": {"enigma": entry.model_copy(
        update={"dice": {**entry.dice, "encoder": "onehot", "interval_resamples": 0}})}})).flat()
    assert recorded["interval_resamples"] == 0 and {**recorded, "tmax": None} == expected
