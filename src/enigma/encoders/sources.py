"""A retrieved reply's source: the conversation a stand-in's reply was said in (the target
table's ``source_context``, ``enigma.agents.transcripts``), as the frozen encoder's blocks read
it: its turns, the same turns as the reply's speaker saw them, and what was said in them."""

from __future__ import annotations

import functools
import json

from enigma.dialogue import Turn
from enigma.encoders.grounding import Mentioned
from enigma.reply_measures import agent_bigrams


@functools.lru_cache(maxsize=1 << 14)
def source_turns(source: str) -> tuple[Turn, ...]:
    """A retrieved reply's own conversation before it: ``source`` is the target table's
    ``source_context``, a JSON list of ``[role, text]`` (``enigma.agents.transcripts``)."""
    return tuple(Turn(role, text) for role, text in json.loads(source))


@functools.lru_cache(maxsize=1 << 14)
def speaker_view(source: str) -> tuple[tuple[Turn, ...], set]:
    """A retrieved reply's own conversation before it as its speaker saw it (its own turns
    "agent", the other side's "user"), and the speaker's bigrams there: ``reply_measures``'s
    history and ``said``. In self-play the bot spoke on both sides; a reply after an agent turn
    was said from the user's side, so the roles are swapped."""
    turns = source_turns(source)
    if turns and turns[-1].role == "agent":
        turns = tuple(Turn("agent" if t.role == "user" else "user", t.text) for t in turns)
    return turns, agent_bigrams(turns)


@functools.lru_cache(maxsize=1 << 14)
def source_said(source: str, role: str | None = None) -> Mentioned:
    """What a retrieved reply's own conversation had said before it (with ``role``, that speaker
    alone); a stand-in retrieves the same few thousand replies again and again."""
    said = Mentioned()
    said.extend(source_turns(source), role=role)
    return said
