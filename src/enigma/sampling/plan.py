"""Which agent calls sample a store's logged states, and with which seeds.

Every agent turn of the store is a logged state occurrence (``logged_agent_states``). The calls
that sample them (``plan_calls``) and each call's seed (``call_seed``) depend on the store, the
seed and the number of samples alone, never on the order of a run, so a resumed run makes
exactly the calls, and draws exactly the replies, an uninterrupted one would have made.
``enigma.sampling.sampler`` makes the calls and records what they return.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any, Iterable, Literal

from enigma.agents import state_hash
from enigma.dialogue import Turn
from enigma.store.experience import ExperienceStore

log = logging.getLogger(__name__)

# How the draws of a run are laid out: one call per occurrence by key (a table of replies), per
# distinct state shared by its occurrences (a deterministic agent), or per batch of occurrences.
DrawMode = Literal["keyed", "state", "occurrence"]


@dataclass(frozen=True)
class LoggedState:
    dialog_id: str
    turn_index: int
    history: tuple[Turn, ...]
    state_hash: str


@dataclass(frozen=True)
class Call:
    """One agent call at ``state``'s history, whose replies go to ``occurrences``: sample-major,
    reply ``i * len(occurrences) + j`` is sample ``i`` of occurrence ``j``. A ``shared`` call's
    ``n`` replies go to every occurrence of the state."""

    state: LoggedState
    occurrences: tuple[LoggedState, ...]
    seed: int
    shared: bool = False
    # per-occurrence draws: which occurrences of the state the store holds (``occurrence_group``)
    group: str | None = None


def call_seed(seed: int, key: str) -> int:
    """A call's seed, derived from what it samples: the same call draws the same replies
    whatever the order of the run."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:4], "big") & 0x7FFFFFFF


def occurrence_key(dialog_id: str, turn_index: int, state_hash: str) -> str:
    return f"{dialog_id}\x1f{turn_index}\x1f{state_hash}"


def occurrence_group(state_hash: str, where: list[str]) -> str:
    """Every occurrence of one state in a store (``where``: each one's dialogue and turn), as a
    digest. A cached reply was drawn in a batch of these; another store with other occurrences of
    the same state (the same opening under the same dialogue ids) would batch it differently, so
    it must not reuse the reply."""
    return hashlib.sha256(f"{state_hash}|{'|'.join(where)}".encode()).hexdigest()[:24]


def draw_mode(agent: Any) -> DrawMode:
    if callable(getattr(agent, "respond_at", None)):
        return "keyed"
    return "state" if getattr(agent, "deterministic", False) is True else "occurrence"


def plan_calls(states: list[LoggedState], n_samples: int, seed: int, mode: DrawMode, max_replies_per_call: int = 64) -> list[Call]:
    """The agent calls that sample every state occurrence of ``states``.

    ``occurrence``: the occurrences of each state, ordered by (dialogue, turn), are cut into
    batches of at most ``max_replies_per_call // n_samples``; each batch is one call for
    ``n_samples x batch`` replies, seeded from the state, ``n_samples`` and the batch's
    occurrences. The batches depend on the store alone, so a resumed run makes exactly the calls
    an uninterrupted one would have made. ``state``: one call per distinct state (as many calls
    as distinct states, no more). ``keyed``: one call per occurrence."""
    if mode == "keyed":
        return [Call(st, (st,), call_seed(seed, occurrence_key(st.dialog_id, st.turn_index, st.state_hash))) for st in states]
    groups: dict[str, list[LoggedState]] = {}
    for st in states:
        groups.setdefault(st.state_hash, []).append(st)
    if mode == "state":
        return [Call(occ[0], tuple(occ), call_seed(seed, h), shared=True) for h, occ in groups.items()]
    per_call = max(1, max_replies_per_call // n_samples)
    calls = []
    for h, occ in groups.items():
        occ.sort(key=lambda st: (st.dialog_id, st.turn_index))
        where = [f"{st.dialog_id}\x1f{st.turn_index}" for st in occ]
        group = occurrence_group(h, where)
        for i in range(0, len(occ), per_call):
            batch = tuple(occ[i : i + per_call])
            key = f"{h}|n={n_samples}|" + "|".join(where[i : i + per_call])
            calls.append(Call(batch[0], batch, call_seed(seed, key), group=group))
    return calls


def logged_agent_states(store: ExperienceStore, exclude_agents: Iterable[str] = ()) -> list[LoggedState]:
    """Every agent turn of every dialogue (dialogue order, then turn order), without the
    dialogues of ``exclude_agents``."""
    exclude = set(exclude_agents)
    if exclude:
        unknown = exclude - set(store.agents())
        if unknown:
            log.warning("exclude_agents: %s not in the store (agents: %s)", sorted(unknown), store.agents())
        store = store.filter_agents(drop=exclude)
    states = []
    for dialog_id, turns in store.histories().items():
        for t, turn in enumerate(turns):
            if turn.role == "agent":
                history = tuple(turns[:t])
                states.append(LoggedState(dialog_id, t, history, state_hash(history)))
    return states
