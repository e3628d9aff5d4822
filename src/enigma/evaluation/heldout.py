"""What an estimator may know about the agent it scores: the held-out protocol.

An estimator gets (1) the experience store WITHOUT any of that agent's rated dialogues and (2) a
``HeldOutAgent`` carrying only what the estimator's information regimes allow: its replies at
the experience's logged states, its own rollouts, or its own dialogues with the ratings removed.
Where those come from is not this module's business: the caller passes ``HeldOutSources``
(callables per agent), e.g. the sampling stage for target actions or the self-play transcripts
for rollouts. The same view serves the leave-one-agent-out study (the agent is in the store and
has truth) and the scoring of a new agent (``enigma estimate``, the nightly job: it may not be).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from enigma.contracts import Agent, Estimator, HeldOutAgent, Regime
from enigma.evaluation.errors import EvaluationError
from enigma.store import schema as S
from enigma.store.experience import ExperienceStore

# Schema metadata key of the sampling stage's approximation label (enigma.sampling.sampler).
APPROXIMATION_KEY = b"enigma.sampling.approximation"


@dataclass
class HeldOutSources:
    """Where the protocol gets what an estimator may know about the held-out agent.

    - ``target_actions(agent_id, experience)``: the agent's replies at the experience's logged
      states (columns dialog_id, turn_index, sample_index, text); rows at states outside the
      experience are dropped (and counted), so the held-out agent's own rated dialogues never
      leak in through their states.
    - ``rollouts(agent_id)``: its self-play or simulated-user dialogues (ratings are removed).
    - ``unrated_dialogues(agent_id)``: its own dialogues; ratings are removed here.
      ``own_dialogues_unrated(full_store)`` builds this from the store.
    - ``agent(agent_id)``: a runnable agent (given to own-rollout estimators).
    - ``labels``: per agent (callable) or for all agents (dict). Keys that name a regime
      (e.g. ``"replies-at-logged-states"``) are attached only for estimators that use it.
    """

    target_actions: Callable[[str, ExperienceStore], pa.Table] | None = None
    rollouts: Callable[[str], ExperienceStore] | None = None
    unrated_dialogues: Callable[[str], ExperienceStore] | None = None
    agent: Callable[[str], Agent] | None = None
    labels: Callable[[str], Mapping[str, str]] | Mapping[str, str] | None = None


def strip_ratings(store: ExperienceStore) -> ExperienceStore:
    """The same dialogues with every rating, raw rating and the free-form ``meta`` nulled
    (meta may carry rater answers; an unrated view must not)."""
    d = store.dialogues
    for i, name in enumerate(d.schema.names):
        if name.startswith(S.RATING_PREFIX) or name.startswith(S.RAW_PREFIX) or name == "meta":
            d = d.set_column(i, d.schema.field(i), pa.nulls(d.num_rows, d.schema.field(i).type))
    return ExperienceStore(d, store.turns, None)


def own_dialogues_unrated(full_store: ExperienceStore) -> Callable[[str], ExperienceStore]:
    def unrated(agent_id: str) -> ExperienceStore:
        return full_store.filter_agents(keep={agent_id})

    return unrated


def regime_names(estimator: Estimator) -> list[str]:
    return sorted(Regime(r).value for r in estimator.regimes)


def experience_without(store: ExperienceStore, agent_id: str, exclude: Sequence[str] = (),
                       require_in_store: bool = True) -> ExperienceStore:
    """The store without the agent's own rated dialogues (and without ``exclude``'s). In the
    leave-one-agent-out study the agent must be in the store (it has truth there); a new agent
    scored on a store (``require_in_store=False``) may not be, and then only ``exclude`` goes."""
    agents = store.agents()
    if require_in_store and agent_id not in agents:
        raise EvaluationError(f"held-out agent {agent_id!r} has no dialogues in the store")
    drop = set(exclude) | ({agent_id} & set(agents))
    return store.filter_agents(drop=drop) if drop else store


def held_out_view(
    store: ExperienceStore,
    agent_id: str,
    estimator: Estimator,
    sources: HeldOutSources,
    *,
    exclude: Sequence[str] = (),
    require_in_store: bool = True,
) -> tuple[ExperienceStore, HeldOutAgent, dict[str, Any]]:
    """The experience and the held-out agent's information for one (estimator, agent), and
    notes for the result's diagnostics (target replies dropped or failed)."""
    experience = experience_without(store, agent_id, exclude, require_in_store)
    regimes = set(Regime(r) for r in estimator.regimes)
    notes: dict[str, Any] = {}
    target = HeldOutAgent(agent_id=agent_id)
    sampled_labels: dict[str, str] = {}

    if Regime.REPLIES_AT_LOGGED_STATES in regimes:
        if sources.target_actions is None:
            raise EvaluationError(
                f"estimator {estimator.name!r} needs the held-out agent's replies at logged states, "
                "but no target_actions source was given"
            )
        table = sources.target_actions(agent_id, experience)
        if not isinstance(table, pa.Table) or "dialog_id" not in table.schema.names:
            raise EvaluationError(
                f"target actions for agent {agent_id!r}: expected a pyarrow Table with a 'dialog_id' column"
            )
        keep = pc.is_in(table.column("dialog_id"), experience.dialogues.column("dialog_id"))
        kept = table.filter(keep)
        notes["target_actions_outside_experience_dropped"] = table.num_rows - kept.num_rows
        if "error" in kept.schema.names:
            notes["target_actions_failed"] = kept.num_rows - kept.column("error").null_count
        target.target_actions = kept
        # The sampling stage marks replies from a stand-in (e.g. retrieval over the agent's own
        # transcripts) as an approximation; the report must show that beside the numbers.
        meta = table.schema.metadata or {}
        approx = meta.get(APPROXIMATION_KEY)
        if approx:
            sampled_labels[Regime.REPLIES_AT_LOGGED_STATES.value] = "target actions: " + approx.decode()
    if Regime.OWN_ROLLOUTS in regimes:
        if sources.rollouts is None and sources.agent is None:
            raise EvaluationError(
                f"estimator {estimator.name!r} needs the held-out agent's rollouts or a runnable agent, "
                "but neither source was given"
            )
        if sources.rollouts is not None:
            target.rollouts = strip_ratings(sources.rollouts(agent_id))
        if sources.agent is not None:
            target.agent = sources.agent(agent_id)
    if Regime.OWN_UNRATED_DIALOGUES in regimes:
        if sources.unrated_dialogues is None:
            raise EvaluationError(
                f"estimator {estimator.name!r} needs the held-out agent's unrated dialogues, "
                "but no unrated_dialogues source was given"
            )
        target.unrated_dialogues = strip_ratings(sources.unrated_dialogues(agent_id))

    labels = dict(sampled_labels)
    labels.update(sources.labels(agent_id) if callable(sources.labels) else (sources.labels or {}))
    regime_values = {r.value for r in Regime}
    used = {r.value for r in regimes}
    target.labels = {k: str(v) for k, v in dict(labels).items() if k not in regime_values or k in used}
    return experience, target, notes
