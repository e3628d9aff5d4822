"""The dialogues a comparator scores, built from what the held-out agent's regime gives.

Every comparator reduces to: compute something on dialogues whose agent turns are the agent's
own words, then map it to a rating. ``AgentDialogue`` is that unit: the turns plus the indices
of the agent turns that belong to the agent being scored (``scored``). For the other agents'
rated logs every agent turn is scored; for replies at logged states (regime a) the logged
dialogue has its agent turns replaced by the target's replies, and only those turns are scored;
for the agent's own rollouts (regime b) every agent turn is scored.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from enigma.contracts import HeldOutAgent, Regime
from enigma.dialogue import Turn
from enigma.store.experience import ExperienceStore


class ComparatorInputError(ValueError):
    """What a comparator was handed is missing or malformed; the message says where."""


@dataclass(frozen=True)
class AgentDialogue:
    dialog_id: str
    turns: tuple[Turn, ...]
    scored: tuple[int, ...]  # indices into ``turns`` of the agent turns being scored

    def scored_texts(self) -> list[str]:
        return [self.turns[i].text for i in self.scored]


def logged_dialogues(store: ExperienceStore) -> list[AgentDialogue]:
    """Every dialogue of the store as logged, in the store's dialogue order."""
    out = []
    for dialog_id, turns in store.histories().items():
        scored = tuple(i for i, t in enumerate(turns) if t.role == "agent")
        out.append(AgentDialogue(dialog_id, tuple(turns), scored))
    return out


def rating_matrix(store: ExperienceStore, names: list[str] | None = None) -> np.ndarray:
    """Ratings as a float array [n_dialogues, n_ratings] (NaN where unrated), rows in the
    store's dialogue order (the order of ``logged_dialogues``)."""
    names = store.rating_names if names is None else names
    cols = []
    for n in names:
        vals = store.ratings(n)
        cols.append([np.nan if v is None else float(v) for v in vals])
    return np.asarray(cols, dtype=np.float64).T.reshape(store.dialogues.num_rows, len(names))


def dialogue_agents(store: ExperienceStore) -> list[str]:
    return store.dialogues.column("agent_id").to_pylist()


@dataclass
class TargetDialogues:
    dialogues: list[AgentDialogue]
    n_failed_replies: int = 0  # sampled replies that came back with an error (not scored)


@dataclass(frozen=True)
class TargetReply:
    """One usable row of ``target_actions``: the target's reply at a logged agent turn."""

    dialog_id: str
    turn_index: int
    sample_index: int
    text: str


def target_replies(experience: ExperienceStore, target: HeldOutAgent) -> tuple[list[TargetReply], int, dict]:
    """The validated rows of ``target.target_actions``, the number of failed samples (rows
    with an ``error``: counted and reported, not scored) and the experience's histories."""
    table = target.target_actions
    if table is None:
        raise ComparatorInputError(
            f"agent {target.agent_id}: no target_actions (replies at logged states) were given"
        )
    missing = {"dialog_id", "turn_index", "sample_index", "text"} - set(table.column_names)
    if missing:
        raise ComparatorInputError(
            f"agent {target.agent_id}: target_actions lacks column(s) {sorted(missing)}"
        )
    histories = experience.histories()
    ids = table.column("dialog_id").to_pylist()
    idx = table.column("turn_index").to_pylist()
    smp = table.column("sample_index").to_pylist()
    txt = table.column("text").to_pylist()
    err = table.column("error").to_pylist() if "error" in table.column_names else [None] * len(ids)
    rows: list[TargetReply] = []
    failed = 0
    for row, (d, t, s, x, e) in enumerate(zip(ids, idx, smp, txt, err), start=1):
        where = f"agent {target.agent_id}: target_actions row {row} (dialog_id={d!r}, turn_index={t})"
        if e is not None:
            failed += 1
            continue
        if d not in histories:
            raise ComparatorInputError(f"{where}: field dialog_id: not a dialogue of the experience data")
        turns = histories[d]
        if t is None or not 0 <= t < len(turns) or turns[t].role != "agent":
            raise ComparatorInputError(f"{where}: field turn_index: not an agent turn of that dialogue")
        if x is None:
            raise ComparatorInputError(f"{where}: field text: missing reply with no error recorded")
        rows.append(TargetReply(d, int(t), 0 if s is None else int(s), x))
    if not rows:
        raise ComparatorInputError(
            f"agent {target.agent_id}: none of the {len(ids)} target replies is usable ({failed} failed)"
        )
    return rows, failed, histories


def replies_at_logged_states(experience: ExperienceStore, target: HeldOutAgent) -> TargetDialogues:
    """The logged dialogues with the target's replies in place of the logged agent turns,
    one dialogue per (dialog_id, sample_index). The user turns after a replaced reply are the
    logged ones (they answered the logged reply): that is the regime's approximation."""
    rows, failed, histories = target_replies(experience, target)
    groups: dict[tuple[str, int], dict[int, str]] = defaultdict(dict)
    for r in rows:
        groups[(r.dialog_id, r.sample_index)][r.turn_index] = r.text
    dialogues = []
    for (d, s), replies in groups.items():
        turns = list(histories[d])
        for t, x in replies.items():
            turns[t] = Turn("agent", x)
        dialogues.append(AgentDialogue(f"{d}#{s}", tuple(turns), tuple(sorted(replies))))
    return TargetDialogues(dialogues, failed)


def own_rollouts(target: HeldOutAgent) -> TargetDialogues:
    if target.rollouts is None:
        raise ComparatorInputError(f"agent {target.agent_id}: no rollouts (own dialogues) were given")
    dialogues = [d for d in logged_dialogues(target.rollouts) if d.scored]
    if not dialogues:
        raise ComparatorInputError(f"agent {target.agent_id}: the rollouts hold no agent turns")
    return TargetDialogues(dialogues)


def own_unrated(target: HeldOutAgent) -> TargetDialogues:
    if target.unrated_dialogues is None:
        raise ComparatorInputError(f"agent {target.agent_id}: no unrated dialogues were given")
    dialogues = [d for d in logged_dialogues(target.unrated_dialogues) if d.scored]
    if not dialogues:
        raise ComparatorInputError(f"agent {target.agent_id}: the unrated dialogues hold no agent turns")
    return TargetDialogues(dialogues)


def target_dialogues(experience: ExperienceStore, target: HeldOutAgent, regime: Regime) -> TargetDialogues:
    """The held-out agent's dialogues as its regime gives them."""
    if regime is Regime.REPLIES_AT_LOGGED_STATES:
        return replies_at_logged_states(experience, target)
    if regime is Regime.OWN_ROLLOUTS:
        return own_rollouts(target)
    if regime is Regime.OWN_UNRATED_DIALOGUES:
        return own_unrated(target)
    raise ComparatorInputError(f"regime {regime.value} gives no dialogues of the agent")
