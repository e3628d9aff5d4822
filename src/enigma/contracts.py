"""The seams of the pipeline (docs/pipeline.md): agents answer histories of turns
(``enigma.dialogue``), and every estimator scores a held-out agent from the other agents'
experience (an ``ExperienceStore``) and returns an ``EstimateResult``. Keep this module free of
heavy imports.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Protocol, runtime_checkable

from enigma.dialogue import History

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import pyarrow as pa

    from enigma.store.experience import ExperienceStore


@runtime_checkable
class Agent(Protocol):
    """Anything that can speak as the agent: given the history so far (oldest first, the
    last turn usually the user's), return ``n`` candidate replies. The same seed must give
    the same replies."""

    def respond(self, history: History, n: int = 1, seed: int | None = None) -> list[str]: ...


class Regime(str, enum.Enum):
    """What an estimator may know about the held-out agent (shown beside its numbers)."""

    NONE = "none"  # nothing: e.g. the experience mean
    REPLIES_AT_LOGGED_STATES = "replies-at-logged-states"  # (a) a'_t ~ pi(s_t) on logged states
    OWN_ROLLOUTS = "own-rollouts"  # (b) dialogues with a simulated/learned user, or self-play
    OWN_UNRATED_DIALOGUES = "own-unrated-dialogues"  # (c) its own human dialogues, ratings hidden


@dataclass
class HeldOutAgent:
    """What the protocol hands an estimator about the agent being scored. Fields that the
    estimator's regime does not allow are left ``None`` by the leave-one-agent-out runner."""

    agent_id: str
    # (a) replies at logged states: columns dialog_id, turn_index, sample_index, text
    target_actions: "pa.Table | None" = None
    # (b) the agent's own rollouts (self-play or with a simulated user), canonical form, unrated
    rollouts: "ExperienceStore | None" = None
    # (c) the agent's own human dialogues with the ratings removed
    unrated_dialogues: "ExperienceStore | None" = None
    # a runnable agent, when there is one (e.g. for a learned-user rollout)
    agent: Agent | None = None
    labels: dict[str, str] = field(default_factory=dict)  # e.g. {"approximation": "..."}


@dataclass(frozen=True)
class EstimateResult:
    """What an estimator returns for one held-out agent. Only ``estimates`` is required; the
    leave-one-agent-out runner writes the rest beside it (one result file per estimator and
    agent, its learning curve and artifacts next to it).

    - ``estimates``: every rating of the experience -> its estimate on the normalised [0, 1]
      scale (NaN where the estimator has none for a rating; the runner records why).
    - ``unnormalised``, ``ess``: per rating, where the estimator has them (ENIGMA: the estimate
      without post-normalisation and the effective sample size of its weights).
    - ``intervals``: per rating, a sampling interval ``(low, high)`` of the estimate where the
      estimator has one (ENIGMA with ``dice.interval_resamples``: the dialogue bootstrap).
    - ``diagnostics``: JSON-able facts about the run (sizes, solver state, ``converged``).
    - ``curve``: a learning curve, one row per logged step (a ``run`` column when there are
      several runs), or None.
    - ``artifacts``: objects saved beside the result with ``torch.save`` under their name (ENIGMA:
      ``heads``, the trained zeta/nu heads, which MLflow logs as a model).
    """

    estimates: Mapping[str, float]
    unnormalised: Mapping[str, float] = field(default_factory=dict)
    ess: Mapping[str, float] = field(default_factory=dict)
    intervals: Mapping[str, "tuple[float, float] | None"] = field(default_factory=dict)
    diagnostics: Mapping[str, Any] = field(default_factory=dict)
    curve: "pd.DataFrame | None" = None
    artifacts: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Estimator(Protocol):
    """Scores a held-out agent from the other agents' rated experience.

    ``experience`` never contains the held-out agent's rated dialogues. ``estimate`` returns an
    ``EstimateResult`` with one value per rating name of the experience (on the normalised
    [0, 1] scale). ``fingerprint()`` is a stable text of every setting that changes the result:
    a saved result is reused only while it (and the data) are unchanged. An optional integer
    ``numerics`` (1 when absent) is the version of the estimator's numbers: a code change that
    moves them bumps it, so saved results are recomputed.
    """

    name: str
    regimes: frozenset[Regime]

    def fingerprint(self) -> str: ...

    def estimate(self, experience: "ExperienceStore", target: HeldOutAgent) -> EstimateResult: ...
