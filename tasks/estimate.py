"""Scoring one held-out agent with one estimator (for ENIGMA: padding + DICE training),
through the leave-one-agent-out protocol of ``enigma.evaluation.loao``."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from prefect import task

from tasks._common import CACHED

# Short names used in params.yaml (``estimators: [...]``); anything else must be a
# ``python:<module>:<factory>`` spec. A factory with a ``params_path`` parameter (or a class
# with ``from_params``) reads its own section of params.yaml.
ESTIMATORS = {
    "enigma": "enigma.ope.estimator:EnigmaEstimator",
    "experience-mean": "enigma.comparators.baselines:ExperienceMean",
}


def build_estimator(name: str, params_path: str = "params.yaml"):
    target = ESTIMATORS.get(name)
    if target is None:
        if not name.startswith("python:"):
            raise ValueError(
                f"estimator {name!r}: unknown; use one of {sorted(ESTIMATORS)} or 'python:<module>:<factory>'"
            )
        target = name[len("python:") :]
    module, _, attr = target.rpartition(":")
    if not module or not attr:
        raise ValueError(f"estimator {name!r}: expected 'python:<module>:<factory>'")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"estimator {name!r}: cannot load {target} ({exc})") from exc
    if hasattr(factory, "from_params"):
        return factory.from_params(params_path)
    try:
        takes_params = "params_path" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        takes_params = False
    return factory(params_path=params_path) if takes_params else factory()


@task(name="estimate-heldout", **CACHED)
def estimate_heldout(
    store_dir: str,
    store_digest: str,
    agent_id: str,
    estimator: str,
    targets: Any = None,
    *,
    results_dir: str,
    params_path: str = "params.yaml",
    params_digest: str = "",
    labels: dict[str, str] | None = None,
) -> list[dict]:
    """One (estimator, held-out agent) result: its rows (one per rating) as records; the
    result file and learning curve land in ``results_dir``. ``params_digest`` only keys the
    cache: an edited params.yaml reruns the estimate (the runner's own file-level resume
    then decides whether the estimator's settings really changed)."""
    from enigma.evaluation.loao import HeldOutSources, evaluate_one
    from enigma.store.experience import ExperienceStore

    est = build_estimator(estimator, params_path)
    sources = HeldOutSources(
        target_actions=(lambda _agent, _experience: targets) if targets is not None else None,
        labels=labels or {},
    )
    rows, _ = evaluate_one(ExperienceStore.open(store_dir), est, agent_id, sources, results_dir)
    out = rows.to_dict(orient="records")
    heads_file = _save_heads(getattr(est, "heads", None), results_dir, est.name, agent_id)
    for r in out:
        r["heads_path"] = heads_file
    return out


def _save_heads(heads, results_dir: str, estimator: str, agent_id: str) -> str | None:
    """Keep the trained zeta/nu heads beside the result file, for MLflow to log as a model.
    A result resumed from disk has no fresh heads; the file saved with it is used."""
    from enigma.evaluation.loao import result_path

    path = result_path(results_dir, estimator, agent_id).with_suffix(".heads.pt")
    if heads is not None:
        import torch

        torch.save(heads, path)
    return str(path) if path.is_file() else None


@task(name="score-new-agent", **CACHED)
def score_new_agent(
    store_dir: str,
    store_digest: str,
    agent_name: str,
    agent_fingerprint: str,
    estimator: str,
    targets: Any = None,
    *,
    params_path: str = "params.yaml",
    params_digest: str = "",
    labels: dict[str, str] | None = None,
) -> dict:
    """Score an agent that has no rated dialogues (a new checkpoint) on the whole store: the
    nightly job's estimate. Returns {"estimates": {rating: v}, "unnormalised", "ess",
    "diagnostics"} with JSON-able values. ``agent_fingerprint`` keys the cache, so a replaced
    checkpoint under the same name is scored again."""
    import pyarrow.compute as pc

    from enigma.contracts import HeldOutAgent, Regime
    from enigma.evaluation.loao import _jsonable_scalars, normalise_result
    from enigma.store.experience import ExperienceStore

    est = build_estimator(estimator, params_path)
    unsupported = set(est.regimes) - {Regime.NONE, Regime.REPLIES_AT_LOGGED_STATES}
    if unsupported:
        raise ValueError(
            f"estimator {est.name!r} needs {sorted(r.value for r in unsupported)}; the nightly job can only "
            "give a new agent's replies at logged states"
        )
    # Strict as in the benchmark: if the store holds rated dialogues of an agent with this
    # name, they are not part of its experience.
    experience = ExperienceStore.open(store_dir).without_agent(agent_name)
    target = HeldOutAgent(agent_id=agent_name, labels=dict(labels or {}))
    if targets is not None and Regime.REPLIES_AT_LOGGED_STATES in est.regimes:
        target.target_actions = targets.filter(
            pc.is_in(targets.column("dialog_id"), experience.dialogues.column("dialog_id"))
        )
    raw = est.estimate(experience, target)
    estimates, extras = normalise_result(raw, experience.rating_names, est.name, agent_name)
    if not extras.get("diagnostics") and isinstance(getattr(est, "diagnostics", None), dict):
        extras["diagnostics"] = _jsonable_scalars(est.diagnostics)

    def _scalars(v):
        return {k: float(x) for k, x in v.items()} if isinstance(v, dict) else (None if v is None else float(v))

    return {
        "estimator": est.name,
        "estimates": estimates,
        "unnormalised": _scalars(extras.get("unnormalised")),
        "ess": _scalars(extras.get("ess")),
        "diagnostics": extras.get("diagnostics") or {},
    }
