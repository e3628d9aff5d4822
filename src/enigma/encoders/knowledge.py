"""The knowledge block of the frozen encoder (``dice.knowledge``): what a reply's looked-up facts
say against the user's words.

In a task dialogue the agent acts on a knowledge base as well as on the words: a booking names a
flight number, and whether that flight is the one the user asked for is in the table, not in the
text. A text-only evaluator then meets the logging agents' table lookups as confounding: two
bookings read alike and differ only in the table. When the user's data has such a table (AirDialogue
ships one per dialogue; the simulator has ``enigma.sim.world``), ``dice.knowledge`` names an
object that reads it, ``python:<module>:<factory>``, and three numbers per pair go beside the
grounding block, outside the PCA (``KNOWLEDGE_MEASURES``):

- whether the reply names anything the knowledge base holds;
- the share of the named entities' facts (a flight's cities and dates) that the *user* had not
  said before the reply: an agent that misheard a city books a flight whose route nobody said;
- whether the knowledge base contradicts the reply (a flight that does not exist, a cancelled
  reservation the book does not hold).

The object needs one method, ``lookup(reply: str) -> Lookup``. It must read only what the agents
themselves could look up, never the user's goal or a rating.

A base may also read what the user asks for: ``request(user_text: str) -> str | None``, the kind of
request a user turn states ("cancel"), with ``Lookup.answers`` the kinds of request a reply's final
action can answer. Such a base gives a fourth number (``REQUEST_CHECK_MEASURE``): whether the reply
takes an action that answers none of what the user last asked for. A cancellation recorded for a
customer who asked for a new flight reads like a right one in every other column; only the
request, which the dialogue states in words, tells them apart. A base without ``request`` keeps
the three numbers, so the settings made with it keep their features.

A base may also search itself with what the user said: ``refutes(reply: str, user_texts: tuple[str,
...]) -> bool``, whether the base, queried with the user's own words so far, contradicts the reply's
final action ("no flights" where the table holds one on the route and dates the user gave, "no
reservation" where the book holds one under the name the user gave, a booking off the user's
route). Such a base gives one more number after the others (``USER_CHECK_MEASURE``). The third
column checks the reply against itself, the name and flight it writes; an agent that misheard the
name writes the misheard one, which the book agrees with. Only the user's words catch that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from enigma import python_spec

KNOWLEDGE_MEASURES = ("names_known", "facts_unsaid", "contradicted")
KNOWLEDGE_DIM = len(KNOWLEDGE_MEASURES)
REQUEST_CHECK_MEASURE = "unrequested"
USER_CHECK_MEASURE = "refuted"


@dataclass(frozen=True)
class Lookup:
    """What a knowledge base says about one reply.

    ``facts``: one entry per fact of the entities the reply names, each the fact's spellings as the
    user might have said it (``("march", "3")`` for a month); a fact counts as said when every word
    of one spelling is among the user's words. ``found``: how many entities the reply names that
    the base holds; ``contradicted``: how many of the reply's claims the base contradicts;
    ``answers``: the kinds of request the reply's final action can answer (none without an
    action), read only by a base that reads requests."""

    facts: tuple[tuple[str, ...], ...] = ()
    found: int = 0
    contradicted: int = 0
    answers: tuple[str, ...] = ()


class KnowledgeBase(Protocol):
    def lookup(self, reply: str) -> Lookup: ...


def knowledge_features(lookup: Lookup, user_words: set[str] | frozenset[str]) -> list[float]:
    """``KNOWLEDGE_MEASURES`` of one reply's lookup, against the user's words so far."""

    def said(fact: tuple[str, ...]) -> bool:
        return any(all(w in user_words for w in spelling.split()) for spelling in fact)

    unsaid = sum(not said(f) for f in lookup.facts) / len(lookup.facts) if lookup.facts else 0.0
    return [float(lookup.found > 0), unsaid, float(lookup.contradicted > 0)]


def reads_requests(base: KnowledgeBase) -> bool:
    """Whether ``base`` reads the user's requests, which adds ``REQUEST_CHECK_MEASURE``."""
    return callable(getattr(base, "request", None))


def checks_against_user(base: KnowledgeBase) -> bool:
    """Whether ``base`` searches itself with the user's words, which adds ``USER_CHECK_MEASURE``."""
    return callable(getattr(base, "refutes", None))


def knowledge_measures(base: KnowledgeBase) -> tuple[str, ...]:
    """The knowledge block's columns for ``base``, in order."""
    return (KNOWLEDGE_MEASURES + ((REQUEST_CHECK_MEASURE,) if reads_requests(base) else ())
            + ((USER_CHECK_MEASURE,) if checks_against_user(base) else ()))


def latest_request(base: KnowledgeBase, turns, asked: str | None = None) -> str | None:
    """The request the user's turns among ``turns`` state last (``asked`` when none states one): a
    customer who corrects a seller that misread them is held to the correction."""
    for turn in turns:
        if turn.role == "user":
            asked = base.request(turn.text) or asked
    return asked


def unrequested(lookup: Lookup, asked: str | None) -> float:
    """1 when the reply acts (``lookup.answers``) and its action answers none of what the user last
    asked for; 0 without an action or before the user has asked for anything."""
    return float(bool(lookup.answers) and asked is not None and asked not in lookup.answers)


def load_knowledge(spec: str, setting: str = "dice.knowledge") -> KnowledgeBase:
    """The knowledge base named by ``python:<module>:<factory>`` (the factory takes no arguments);
    an error names ``setting``, the key that gave the spec."""
    where = f"{setting} {spec!r}"
    factory, name = python_spec.load_factory(spec, where)
    base = python_spec.call_factory(factory, name, where)
    if not callable(getattr(base, "lookup", None)):
        raise ValueError(f"{where}: {name}() returned {type(base).__name__}, which has no lookup(reply)")
    return base
