"""What a reply does at its state, in See et al.'s (2019) terms: word bigrams and how much of a
reply repeats the agent, itself or the user, whether it asks, how long it is.

Shared by the comparators' dialogue features (``enigma.comparators.features``: their means over a
dialogue) and ENIGMA's frozen encoder (``dice.reply_measures``: one vector per state-action pair,
``reply_measures``), so that both read a reply the same way.
"""

from __future__ import annotations

import math
import re
from typing import Iterable, Protocol, Sequence

# a word with its English contraction ("don't", "i'm"): See's tokens, lower-cased
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

# per pair, in this order (``reply_measures``)
REPLY_MEASURES = ("self_repetition", "internal_repetition", "partner_repetition", "question", "log_length")
REPLY_MEASURES_DIM = len(REPLY_MEASURES)


class Utterance(Protocol):
    role: str
    text: str


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def bigrams(tokens: Sequence[str]) -> list[tuple[str, str]]:
    return list(zip(tokens, tokens[1:]))


def overlap_share(grams: list, seen: set) -> float:
    """Share of ``grams`` (with multiplicity) found in ``seen``; 0 for an empty list."""
    if not grams:
        return 0.0
    return sum(g in seen for g in grams) / len(grams)


def internal_repetition(tokens: Sequence[str]) -> float:
    """Share of the bigrams of ``tokens`` that repeat an earlier bigram of the same text."""
    grams = bigrams(tokens)
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def last_user_turn(history: Sequence[Utterance]) -> Utterance | None:
    return next((h for h in reversed(history) if h.role == "user"), None)


def agent_bigrams(history: Iterable[Utterance]) -> set:
    """Every bigram the agent said in ``history``."""
    said: set = set()
    for turn in history:
        if turn.role == "agent":
            said.update(bigrams(words(turn.text)))
    return said


def reply_measures(reply: str, history: Sequence[Utterance], said: set | None = None) -> list[float]:
    """``REPLY_MEASURES`` of ``reply`` given the dialogue before it: the share of its bigrams the
    agent had said earlier in the dialogue (See's avoid_rep rating tracks it), repeated within
    the reply, and copied from the user's last turn; 1 if it asks; log(1 + words). ``said`` is
    ``agent_bigrams(history)`` when the caller already has it (one pass over a dialogue)."""
    tokens = words(reply)
    grams = bigrams(tokens)
    if said is None:
        said = agent_bigrams(history)
    user = last_user_turn(history)
    partner = overlap_share(grams, set(bigrams(words(user.text)))) if user is not None else 0.0
    return [
        overlap_share(grams, said),
        internal_repetition(tokens),
        partner,
        1.0 if "?" in reply else 0.0,
        math.log1p(len(tokens)),
    ]
