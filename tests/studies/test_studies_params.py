"""studies/params.yaml is the product's params.yaml extended with the lab's rows: every product
setting as the product has it, the lab's rows and results beside the product's (never in its
folders), and studies/dvc.yaml stamps its stages out for the benchmarks that have study rows."""

from __future__ import annotations

import yaml

from enigma.params import Params
from tests.conftest import REPO_ROOT
from tests.ope.test_ope_numerics import LAB_ROWS

PRODUCT = REPO_ROOT / "params.yaml"
LAB = REPO_ROOT / "studies" / "params.yaml"


def test_the_lab_extends_the_product_and_changes_none_of_its_rows():
    product, lab = Params.load(PRODUCT), Params.load(LAB)
    assert yaml.safe_load(LAB.read_text())["extends"] == "../params.yaml"
    for name, entry in product.estimators.items():
        assert lab.estimators[name] == entry, name
    assert set(lab.estimators) > set(product.estimators)
    for name, b in product.benchmarks.items():
        assert lab.benchmarks[name].model_dump(exclude={"full_estimators"}) == b.model_dump(exclude={"full_estimators"}), name
    for section in ("shared", "ingest", "simulate", "sample", "encode", "comparators", "nightly", "serve"):
        assert getattr(lab, section) == getattr(product, section), section
    # the product's full runs hold no studied row, and the lab's none of the product's
    lab_rows = set(lab.estimators) - set(product.estimators)
    for name, b in product.benchmarks.items():
        assert not lab_rows & set(b.full_estimators + b.estimators), name
        assert not set(lab.benchmarks[name].full_estimators) - lab_rows, name


def test_the_labs_results_and_reports_go_apart_from_the_products():
    product, lab = Params.load(PRODUCT), Params.load(LAB)
    for name in ("airline", "see2019"):
        p, s = product.benchmark(name), lab.benchmark(name)
        assert s.results_dir() == p.results_dir()  # the main run's results: read, never written, by the lab
        assert s.results_dir(full=True) not in (p.results_dir(), p.results_dir(full=True))
        assert s.report_dir(full=True).parts[0] == "studies"
    assert lab.tracking.experiment != product.tracking.experiment and lab.tracking.registered_model is None


def test_a_studied_row_keeps_its_own_knowledge_choice():
    from enigma.estimators import benchmark_estimator  # Benchmark.build_estimator moved there (layers)

    lab = Params.load(LAB)
    airline = lab.benchmark("airline")
    assert benchmark_estimator(airline, "enigma-without-knowledge", lab).config.frozen.knowledge is None
    assert (benchmark_estimator(airline, "enigma-simulator-knowledge", lab).config.frozen.knowledge
            == "python:enigma.sim.knowledge:airline_checked_every_turn")


def test_the_product_pins_the_numbers_of_the_labs_linear_q_row_as_it_is():
    lab = yaml.safe_load(LAB.read_text())
    assert lab["estimators"]["enigma-lstd"]["base"] == LAB_ROWS["enigma-lstd"]["base"]
    assert lab["estimators"]["enigma-lstd"]["dice"] == LAB_ROWS["enigma-lstd"]["dice"]


def test_the_labs_dvc_stages_cover_the_benchmarks_with_study_rows():
    from dvc.repo import Repo

    lab = Params.load(LAB)
    with_rows = set(yaml.safe_load(LAB.read_text())["benchmarks"])
    assert with_rows == {n for n, b in lab.benchmarks.items() if set(b.full_estimators) - set(Params.load(PRODUCT).estimators)}
    with Repo(str(REPO_ROOT)) as repo:
        stages = {s.addressing: s for s in repo.index.stages if s.addressing.startswith("studies/dvc.yaml:")}
    assert set(stages) == {f"studies/dvc.yaml:{k}@{b}" for k in ("train", "report") for b in with_rows}
    for name in with_rows:
        b = lab.benchmark(name)
        train, report = stages[f"studies/dvc.yaml:train@{name}"], stages[f"studies/dvc.yaml:report@{name}"]
        assert train.cmd == f"enigma stage train {name} --full --params studies/params.yaml"
        assert report.cmd == f"enigma stage report {name} --full --params studies/params.yaml --no-progress"
        root = REPO_ROOT.resolve()
        assert {o.fs_path for o in train.outs} == {str(root / b.results_dir(full=True))}
        assert {o.fs_path for o in report.outs} == {str(root / b.report_dir(full=True))}
        assert str(root / b.results_dir()) in {d.fs_path for d in report.deps}
