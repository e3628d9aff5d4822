"""Behaviour-cloning examples from a rated store: every logged agent turn, with the conversation
before it as its context, in the data mixes of ``LMConfig.mixes``."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from enigma.dialogue import Turn
from enigma.lm.config import MixConfig
from enigma.store.experience import ExperienceStore


@dataclass(frozen=True)
class Example:
    agent_id: str
    history: tuple[Turn, ...]  # every turn before the reply
    reply: str


def examples(store: ExperienceStore) -> list[Example]:
    """Every agent turn of the store, in the store's dialogue order."""
    agents = dict(zip(store.dialogues.column("dialog_id").to_pylist(), store.dialogues.column("agent_id").to_pylist()))
    out = []
    for dialog_id, turns in store.histories().items():
        for j, t in enumerate(turns):
            if t.role == "agent":
                out.append(Example(agents[dialog_id], tuple(turns[:j]), t.text))
    return out


def top_agents(store: ExperienceStore, rating: str, share: float) -> set[str]:
    """The agents whose mean logged ``rating`` is in the top ``share`` (at least one)."""
    if rating not in store.rating_names:
        raise ValueError(f"mix: rating {rating!r} is not in the store (it has {store.rating_names})")
    by_agent: dict[str, list[float]] = {}
    for a, v in zip(store.dialogues.column("agent_id").to_pylist(), store.ratings(rating)):
        if v is not None:
            by_agent.setdefault(a, []).append(v)
    ranked = sorted(by_agent, key=lambda a: (-float(np.mean(by_agent[a])), a))
    return set(ranked[: max(1, round(share * len(ranked)))])


def mix(store: ExperienceStore, cfg: MixConfig, seed: int) -> list[Example]:
    """The examples of one data mix (seeded: the same store and seed give the same list)."""
    every = examples(store)
    keep = top_agents(store, cfg.rating, cfg.top_share) if cfg.top_share < 1 else None
    chosen = [e for e in every if keep is None or e.agent_id in keep]
    if cfg.swap_share > 0:
        r = random.Random(seed)
        replies = [e.reply for e in every]
        chosen = [Example(e.agent_id, e.history, r.choice(replies)) if r.random() < cfg.swap_share else e for e in chosen]
    return chosen
