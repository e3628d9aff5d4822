"""DiceConfig's parts (issue 59, item 3): the flat params.yaml ``dice`` section is routed to one
config per module, a key of the solver not chosen is an error that names both, and each module
takes only its part."""

from __future__ import annotations


import pytest

from enigma.ope.config import (
    ENIGMA_DEFAULT,
    DiceConfig,
    ExactNuConfig,
    FinetuneFeatures,
    FqeConfig,
    FrozenFeatures,
    GdaConfig,
    IntervalConfig,
    ObjectiveConfig,
    OnehotFeatures,
    ValueConfig,
)


def test_the_flat_section_is_routed_to_each_part():
    cfg = DiceConfig.from_section({"steps": 7, "project_dim": 16, "fqe": {"ensemble": 2}, "interval_refit": "kkt",
                                   "alpha_nu": 0.01, "value": "q", "seed": 3, "constraint_tol": 1e-5})
    assert isinstance(cfg.solver, ExactNuConfig) and (cfg.solver.steps, cfg.solver.constraint_tol) == (7, 1e-5)
    assert isinstance(cfg.features, FrozenFeatures) and cfg.features.project_dim == 16 and cfg.features.agreement is True
    # fqe replaces ENIGMA's fqe whole, as a section's key always has
    assert cfg.value == ValueConfig(kind="q", q_ridge=0.01, q_model="fqe", dr_slot_tol=0.1, dr_zeta_cap=1.0, fqe=FqeConfig(ensemble=2))
    assert cfg.interval == IntervalConfig(resamples=100, tol=0.001, refit="kkt")
    assert cfg.objective.alpha_nu == 0.01 and cfg.objective.lambda_per_slot is True and cfg.seed == 3
    # the flat view gives the section back: every key of ENIGMA's as the product runs it, at its value
    flat = cfg.flat()
    assert flat["solver"] == "exact_nu" and flat["value"] == "q" and flat["interval_refit"] == "kkt"
    for key, value in ENIGMA_DEFAULT.items():
        if key not in ("preset", "steps", "project_dim", "alpha_nu", "fqe", "interval_refit", "value"):
            assert flat[key] == value, key
    assert DiceConfig.from_flat(flat) == cfg
    # the nested form (what the fingerprint digests) validates back to the same config too
    assert DiceConfig.model_validate(cfg.model_dump(mode="json")) == cfg
    # and a flat constructor call is the same as the section without a preset's values
    assert DiceConfig(solver="exact_nu", alpha_nu=1.0, encoder="onehot") == DiceConfig(
        solver=ExactNuConfig(), objective=ObjectiveConfig(alpha_nu=1.0), features=OnehotFeatures())


@pytest.mark.parametrize(("section", "key", "solver"), [
    ({"preset": "exact_nu", "lr": 0.5}, "lr", "exact_nu"),
    ({"stop_window": 100}, "stop_window", "exact_nu"),  # ENIGMA's default solver
    ({"preset": "exact_nu", "optimizer": "sgd"}, "optimizer", "exact_nu"),
    ({"preset": "gda", "solver_tol": 1e-8}, "solver_tol", "gda"),
    ({"preset": "paper", "constraint_tol": 1e-3}, "constraint_tol", "gda"),
])
def test_a_key_of_the_other_solver_is_an_error_that_names_it(section, key, solver):
    other = "gda" if solver == "exact_nu" else "exact_nu"
    with pytest.raises(ValueError, match=f"dice.{key} is a setting of solver {other}; solver {solver} has no {key}"):
        DiceConfig.from_section(section)


def test_what_exact_nu_fixes_is_accepted_at_its_value_only():
    # a section inherited by a gda row (enigma-gda from enigma) or written before the split resolves
    cfg = DiceConfig.preset("exact_nu", head_hidden=0, batch_size=None, slot_normalise=False, average_last=0.0)
    assert cfg == DiceConfig.preset("exact_nu")
    assert (cfg.solver.head_hidden, cfg.solver.batch_size, cfg.solver.slot_normalise, cfg.solver.average_last) == (0, None, False, 0.0)
    assert "head_hidden" not in cfg.flat() and "head_hidden" not in cfg.model_dump()["solver"]
    for key, value, shown in (("head_hidden", 64, "0"), ("batch_size", 32, "null"), ("slot_normalise", True, "false"),
                              ("average_last", 0.2, "0.0")):
        with pytest.raises(ValueError, match=f"solver exact_nu needs {key}: {shown} "):
            DiceConfig.preset("exact_nu", **{key: value})
    with pytest.raises(ValueError, match="alpha_nu > 0"):
        DiceConfig.preset("exact_nu", alpha_nu=0.0)
    # gda has them all as settings of its own
    gda = DiceConfig.preset("gda", head_hidden=8, batch_size=32, slot_normalise=True, average_last=0.5)
    assert isinstance(gda.solver, GdaConfig) and (gda.solver.head_hidden, gda.solver.batch_size) == (8, 32)


def test_the_frozen_features_settings_exist_on_the_frozen_encoder_only():
    # onehot is exact by construction: the text settings (ENIGMA's own project_dim and blocks) are dropped
    onehot = DiceConfig.from_section({"encoder": "onehot"})
    assert onehot.features == OnehotFeatures() and onehot.frozen is None and onehot.q_project_dim is None
    # finetune has no field for them: set away from their defaults they are an error that names the key
    for key, value in (("project_dim", 8), ("agreement", True), ("pca", "exact"), ("target_history", "logged")):
        with pytest.raises(ValueError, match=f"{key}.*needs encoder frozen"):
            DiceConfig.preset("gda", encoder="finetune", **{key: value})
    tuned = DiceConfig.preset("gda", encoder="finetune", encoder_model="tiny", agreement=False, knowledge=None)
    assert tuned.features == FinetuneFeatures(encoder_model="tiny") and tuned.frozen is None
    with pytest.raises(ValueError, match="unknown dice setting 'no_such_key'"):
        DiceConfig.from_section({"no_such_key": 1})


def test_each_module_takes_only_its_part():
    import inspect

    from enigma.ope import bootstrap, diagnostics, exact_nu, features, fqe, gda, guards, objective, zeta_problem

    def ann(fn, name):  # the annotation as written (the modules postpone their annotations)
        return inspect.signature(fn).parameters[name].annotation

    assert (ann(exact_nu.fit_exact_nu, "solver"), ann(exact_nu.fit_exact_nu, "objective")) == ("ExactNuConfig", "ObjectiveConfig")
    assert ann(exact_nu.refit_kkt, "solver") == ann(exact_nu.solve_exact_nu, "solver") == "ExactNuConfig"
    assert ann(zeta_problem.ZetaProblem, "objective") == "ObjectiveConfig"
    assert (ann(gda.solve_gda, "solver"), ann(gda.solve_gda, "objective")) == ("GdaConfig", "ObjectiveConfig")
    assert ann(objective.lagrangian, "objective") == "ObjectiveConfig"
    assert ann(fqe.fit_turn_q, "cfg") == "FqeConfig"
    assert ann(guards.dr_balance_problem, "value") == "ValueConfig" and ann(guards.check_zeta, "solver") == "SolverConfig"
    assert [ann(bootstrap.bootstrap_estimates, n) for n in ("solver", "objective", "interval", "value")] == [
        "ExactNuConfig", "ObjectiveConfig", "IntervalConfig", "ValueConfig"]
    assert ann(features.Features, "frozen") == "FrozenFeatures | None"
    # no module below the trainer is handed the whole config
    for module in (bootstrap, diagnostics, exact_nu, features, fqe, gda, guards, objective):
        for name, fn in vars(module).items():
            if (inspect.isfunction(fn) or inspect.isclass(fn)) and fn.__module__ == module.__name__:
                try:
                    params = inspect.signature(fn).parameters.values()
                except ValueError:  # a class with no signature of its own (an autograd Function)
                    continue
                for p in params:
                    assert "DiceConfig" not in str(p.annotation), f"{module.__name__}.{name}({p.name})"
