"""The benchmarks' params rows (studies/bench_params.py)."""

from __future__ import annotations

from studies.bench_params import with_dice


def test_with_dice_overrides_one_estimators_settings_and_leaves_the_mapping_alone():
    base = {"shared": {"seed": 0}, "estimators": {"enigma": {"dice": {"q_model": "lstd", "fqe": {"epochs": 20}}}, "other": {"dice": {}}}}
    got = with_dice(base, {"q_model": "fqe", "fqe": {"agreement": False}})
    assert got["estimators"]["enigma"]["dice"] == {"q_model": "fqe", "fqe": {"agreement": False}}  # keys replaced whole
    assert base["estimators"]["enigma"]["dice"] == {"q_model": "lstd", "fqe": {"epochs": 20}}
    assert got["estimators"]["other"] == {"dice": {}} and got["shared"] == {"seed": 0}


def test_write_row_params_writes_the_with_dice_mapping(tmp_path):
    import yaml

    from studies.bench_params import write_row_params

    base = {"estimators": {"enigma": {"dice": {"q_model": "lstd", "steps": 400}}}}
    path = write_row_params(tmp_path / "row", base, {"steps": 200})
    assert path == tmp_path / "row" / "params.yaml"
    assert yaml.safe_load(path.read_text()) == with_dice(base, {"steps": 200})
