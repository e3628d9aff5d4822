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
    "enigma": "tasks.estimate:enigma_from_params",
    "enigma-random-encoder": "tasks.estimate:enigma_random_encoder_from_params",
    "enigma-gda": "tasks.estimate:enigma_gda_from_params",
    "experience-mean": "enigma.comparators.baselines:ExperienceMean",
}


def enigma_from_params(params_path: str = "params.yaml"):
    """ENIGMA with the ``dice`` section of params.yaml (a preset plus overrides) and the
    ``encode`` stage's embedding cache."""
    from enigma.ope.estimator import EnigmaEstimator

    # Several held-out agents train at once in a flow: one progress bar each would interleave.
    return EnigmaEstimator.from_params(params_path, progress=False)


def enigma_random_encoder_from_params(params_path: str = "params.yaml"):
    """The encoder ablation (issue 7 item 8): ENIGMA exactly as ``enigma`` but with the frozen
    encoder's model (``dice.encoder_model``) replaced by the same architecture with random
    weights, seeded by ``dice.seed``. Its embeddings live in a cache namespace of their own
    (``enigma.encoders.weights``: ``random:<base>:<seed>``)."""
    from enigma.ope.estimator import EnigmaEstimator

    est = EnigmaEstimator.from_params(params_path, progress=False, name="enigma-random-encoder")
    if est.config.encoder == "onehot":
        raise ValueError(f"{params_path}: enigma-random-encoder needs a text encoder (dice.encoder frozen or finetune), not onehot")
    model = f"random:{est.config.encoder_model}:{est.config.seed}"
    est.config = est.config.model_copy(update={"encoder_model": model})
    return est


def enigma_gda_from_params(params_path: str = "params.yaml"):
    """ENIGMA solved by gradient descent-ascent as the default was before ``exact_nu``: the
    ``dice`` section with the ``dice_gda`` section's overrides on top, so that a report shows
    the converged solver and the old one side by side, paired, on the same features."""
    from enigma.ope.config import DiceConfig
    from enigma.ope.estimator import EnigmaEstimator
    from enigma.params import ParamsError, load_params

    params = load_params(params_path)
    est = EnigmaEstimator.from_params(params_path, progress=False, name="enigma-gda")
    try:
        est.config = DiceConfig.from_section({**(params.get("dice") or {}), **(params.get("dice_gda") or {})})
    except ValueError as exc:
        raise ParamsError(f"{params_path}: sections 'dice' + 'dice_gda': {exc}") from exc
    return est


def build_estimator(name: str, params_path: str = "params.yaml"):
    """An estimator by name: ``enigma``, a comparator of ``enigma.comparators.catalog``, or a
    ``python:<module>:<factory>`` spec."""
    target = ESTIMATORS.get(name)
    if target is None and not name.startswith("python:"):
        from enigma.comparators import catalog

        if name in catalog.NAMES:
            return catalog.build(name, params_path)
    if target is None:
        if not name.startswith("python:"):
            raise ValueError(
                f"estimator {name!r}: unknown; use 'enigma', a comparator name (enigma.comparators.catalog.NAMES) "
                "or 'python:<module>:<factory>'"
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
    rollouts_dir: str | None = None,
    rollouts_digest: str = "",
) -> list[dict]:
    """One (estimator, held-out agent) result: its rows (one per rating) as records; the
    result file and learning curve land in ``results_dir``. ``params_digest`` only keys the
    cache: an edited params.yaml reruns the estimate (the runner's own file-level resume
    then decides whether the estimator's settings really changed)."""
    from enigma.store.experience import ExperienceStore

    est = build_estimator(estimator, params_path)
    rollouts = ExperienceStore.open(rollouts_dir) if rollouts_dir else None
    return run_heldout(est, ExperienceStore.open(store_dir), agent_id, targets, results_dir, labels, rollouts)


def run_heldout(
    est, store, agent_id: str, targets: Any, results_dir: str, labels: dict | None = None, rollouts: Any = None
) -> list[dict]:
    """The body of ``estimate_heldout`` for an already built estimator (the DVC stage reuses
    one estimator, and so its encoder, across held-out agents). ``rollouts`` is a store of
    unrated dialogues of the agents themselves (e.g. See 2019's self-play), for the
    estimators of the own-rollouts regime."""
    from enigma.evaluation.heldout import HeldOutSources
    from enigma.evaluation.loao import evaluate_one
    from enigma.evaluation.results import artifact_path

    def own_rollouts(agent: str):
        got = rollouts.filter_agents(keep={agent})
        if got.dialogues.num_rows == 0:
            raise ValueError(f"agent {agent!r} has no dialogues in the rollouts store")
        return got

    sources = HeldOutSources(
        target_actions=(lambda _agent, _experience: targets) if targets is not None else None,
        rollouts=own_rollouts if rollouts is not None else None,
        labels=labels or {},
    )
    rows, _ = evaluate_one(store, est, agent_id, sources, results_dir)
    out = rows.to_dict(orient="records")
    heads = artifact_path(results_dir, est.name, agent_id, "heads")
    for r in out:
        r["heads_path"] = str(heads) if heads.is_file() else None
    return out


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
    from enigma.evaluation.results import jsonable_scalars
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
    result = est.estimate(experience, target)
    estimates = {r: float(result.estimates[r]) for r in experience.rating_names}
    extras = {"unnormalised": dict(result.unnormalised) or None, "ess": dict(result.ess) or None,
              "diagnostics": jsonable_scalars(result.diagnostics)}

    def _scalars(v):
        return {k: float(x) for k, x in v.items()} if isinstance(v, dict) else (None if v is None else float(v))

    return {
        "estimator": est.name,
        "estimates": estimates,
        "unnormalised": _scalars(extras.get("unnormalised")),
        "ess": _scalars(extras.get("ess")),
        "diagnostics": extras.get("diagnostics") or {},
    }
