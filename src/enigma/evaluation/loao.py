"""Scoring held-out agents: ``evaluate_one`` is the one way an agent is scored, used alike by
the leave-one-agent-out study (``run_loao``, the pipeline's train stage), ``enigma estimate``
and the nightly job.

For one (estimator, agent) it builds the held-out view (``heldout``), reuses the saved result
when the experience, the estimator's settings and what it was given about the agent are
unchanged (``fingerprints``), and otherwise runs the estimator and writes its result file
(``results``) as soon as it finishes, so a long run can be stopped and resumed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable, Literal, Sequence

import pandas as pd
from tqdm.auto import tqdm

from enigma.contracts import Estimator
from enigma.evaluation.errors import EvaluationError
from enigma.evaluation.fingerprints import result_fingerprint
from enigma.evaluation.heldout import HeldOutSources, held_out_view
from enigma.evaluation.results import RESULT_COLUMNS, read_saved, record_failure, result_path, result_rows, write_result
from enigma.store.experience import ExperienceStore


def evaluate_one(
    store: ExperienceStore,
    estimator: Estimator,
    agent_id: str,
    sources: HeldOutSources,
    results_dir: str | Path | None = None,
    resume: bool = True,
    *,
    exclude: Sequence[str] = (),
    require_in_store: bool = True,
) -> tuple[pd.DataFrame, bool]:
    """Score one agent with one estimator on ``store`` without the agent's own rated dialogues
    (and without ``exclude``'s). Returns its result rows and whether they came from a saved
    result (resume) rather than a fresh run. ``require_in_store=False`` scores an agent that
    has no dialogues in the store (a new agent)."""
    # The view comes first: what the estimator is given about the agent (its sampled replies,
    # its rollouts) is part of what a saved result depends on.
    experience, target, notes = held_out_view(store, agent_id, estimator, sources, exclude=exclude,
                                              require_in_store=require_in_store)
    fingerprint = result_fingerprint(experience, estimator, target)
    path = result_path(results_dir, estimator.name, agent_id) if results_dir is not None else None
    if path is not None and resume:
        saved = read_saved(path, fingerprint)
        if saved is not None:
            return saved, True

    start = time.perf_counter()
    result = estimator.estimate(experience, target)
    seconds = time.perf_counter() - start
    rows = result_rows(result, estimator, agent_id, experience.rating_names, labels=target.labels, notes=notes,
                       n_experience_dialogues=experience.dialogues.num_rows, seconds=seconds)
    if path is not None:
        write_result(path, fingerprint, rows, result)
    return pd.DataFrame(rows, columns=RESULT_COLUMNS), False


def run_loao(
    store: ExperienceStore,
    estimators: Iterable[Estimator],
    sources: HeldOutSources | None = None,
    *,
    agents: Sequence[str] | None = None,
    results_dir: str | Path | None = None,
    resume: bool = True,
    errors: Literal["raise", "record"] = "raise",
    progress: bool = True,
) -> pd.DataFrame:
    """Every estimator on every held-out agent (``agents``: by default every agent of the
    store). With ``errors="record"`` an estimator that fails on an agent gives rows with
    ``error`` set (and is retried on the next run) instead of stopping the whole run."""
    sources = sources or HeldOutSources()
    estimators = list(estimators)
    names = [e.name for e in estimators]
    if len(set(names)) != len(names):
        raise EvaluationError(f"estimator names must be unique, got {names}")
    agent_ids = list(agents) if agents is not None else store.agents()
    unknown = sorted(set(agent_ids) - set(store.agents()))
    if unknown:
        raise EvaluationError(f"held-out agent(s) {unknown} have no dialogues in the store")
    records: list[dict[str, Any]] = []
    pairs = [(e, a) for e in estimators for a in agent_ids]
    bar = tqdm(pairs, desc="leave-one-agent-out", unit="run", disable=not progress)
    n_resumed = 0
    for est, agent_id in bar:
        bar.set_postfix_str(f"{est.name} / {agent_id}", refresh=False)
        try:
            rows, resumed = evaluate_one(store, est, agent_id, sources, results_dir, resume)
            n_resumed += resumed
        except Exception as exc:
            if errors == "raise":
                raise
            # in memory only: the library runner leaves nothing on disk for a failure (the pipeline
            # stage writes it, so that its report lists it)
            rows = pd.DataFrame(record_failure(None, est, agent_id, store.rating_names, exc), columns=RESULT_COLUMNS)
        records += rows.to_dict(orient="records")
    bar.close()
    if progress and n_resumed:
        tqdm.write(f"leave-one-agent-out: {n_resumed} of {len(pairs)} results reused from {results_dir}")
    return pd.DataFrame(records, columns=RESULT_COLUMNS)
