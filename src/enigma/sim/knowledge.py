"""The airline world as a knowledge base an evaluator may read (``dice.knowledge``).

An agent of this world acts on what it heard *and* on what it looked up: the timetable and the
reservation book of ``enigma.sim.world``. A booking names a flight number, never its route, so
whether it is the flight the customer asked for is not in the words of any turn; it is in the
table. AirDialogue ships each dialogue's table with the dialogue for the same reason. This module
is that table's side of the frozen encoder's knowledge block (``enigma.encoders.knowledge``): for
one reply it says which entities the reply names, what the table knows about them, and which of
the reply's claims the table contradicts. It never reads a customer's goal or a rating, only the
public world that every seller queries.

Spec: ``python:enigma.sim.knowledge:airline``. ``python:enigma.sim.knowledge:airline_requests`` is
the same table that also reads what the customer asks for (book, change, cancel) with the parser
every seller uses, so that a final action of another kind is flagged (``Lookup.answers``).
``python:enigma.sim.knowledge:airline_checked`` also searches the table and the reservation book
with the trip and name the customer's words state (``refutes``), as a seller that heard them right
would: "no flights" is refuted where the table holds a flight on the stated route and dates that
meets the stated preferences. ``python:enigma.sim.knowledge:airline_checked_every_turn`` also
checks the book before the final action: once the customer has asked to change or cancel and given
a name the book holds no reservation under, a reply that carries on with the change or cancellation
presumes what cannot be done, such as a seller that never checks asking to confirm a cancellation
(``AirlineKnowledgeCheckedEveryTurn``).
"""

from __future__ import annotations

import re
from functools import lru_cache

from enigma.dialogue import Turn
from enigma.encoders.knowledge import Lookup
from enigma.sim import world as W
from enigma.sim.goals import meets_preferences
from enigma.sim.language import read_action, read_agent, read_customer
from enigma.sim.seller_presets import SellerKnobs
from enigma.sim.sellers import Belief, SellerAgent

# flight numbers are six digits (world: 100000 plus the position in the whole timetable)
_NUMBER = re.compile(r"(?<![\d$.])(\d{6})(?![\d])")
_STATUSES_ON_A_RESERVATION = ("change", "cancel")
# the requests each final status can answer: "no flights" answers a booking or a change, "no
# reservation" a change or a cancellation; "none" (no action taken) claims nothing
_ANSWERS = {"book": ("book",), "change": ("change",), "cancel": ("cancel",),
            "no_flight": ("book", "change"), "no_reservation": ("change", "cancel"), "none": ()}


def _flight_facts(f: W.Flight) -> tuple[tuple[str, ...], ...]:
    """What the customer would have said for this flight: the two cities and the two dates,
    each date as its day and its month (by name or by number, the customer's ``3/9`` form)."""
    month = W.MONTHS[f.dep_month - 1].lower()
    return (
        (W.AIRPORTS[f.origin].lower(),),
        (W.AIRPORTS[f.destination].lower(),),
        (month, str(f.dep_month)),
        (str(f.dep_day),),
        (str(f.ret_day),),
    )


def _book_contradicts(status: str, name: str) -> bool:
    """Whether the reservation book, looked up under ``name``, contradicts a final ``status``: a
    change or a cancellation of a reservation it does not hold, or "no reservation" where it holds one."""
    held = W.reservation_for(name) is not None
    return (status in _STATUSES_ON_A_RESERVATION and not held) or (status == "no_reservation" and held)


class AirlineKnowledge:
    """``lookup(reply)``: the flights a reply names (any six-digit number the timetable holds)
    and, for its final action, whether the reservation book agrees with it."""

    def lookup(self, reply: str) -> Lookup:
        facts: list[tuple[str, ...]] = []
        found = contradicted = 0
        for number in dict.fromkeys(int(m) for m in _NUMBER.findall(reply)):  # once each, in order
            flight = W.flight_by_number(number)
            if flight is None:
                contradicted += 1  # a flight number the timetable does not have
            else:
                found += 1
                facts.extend(_flight_facts(flight))
        action = read_action(reply)
        answers = _ANSWERS[action.status] if action is not None else ()
        if action is not None and action.name.strip():
            found += 1
            contradicted += _book_contradicts(action.status, action.name)
        return Lookup(tuple(facts), found, contradicted, answers)


class AirlineKnowledgeAndRequests(AirlineKnowledge):
    """The table, and ``request(user_text)``: what a customer's turn asks for, as the sellers read it."""

    def request(self, user_text: str) -> str | None:
        return read_customer(user_text).intent


# The customer's words as a seller that hears every slot right understands them: the check below
# searches with what was said, not with what some seller heard.
_HEARS_RIGHT = SellerAgent("hears-right", SellerKnobs())


@lru_cache(maxsize=4096)
def stated_trip(user_texts: tuple[str, ...]) -> Belief:
    """What the customer's turns state; a later statement of a slot replaces an earlier one, as a
    correction does. Cached: the encoder asks for the same state's turns once per reply there (the
    logged one and each target's); the Belief returned is shared, so read it, do not change it."""
    return _HEARS_RIGHT.understand(tuple(Turn("user", text) for text in user_texts))


def stated_flights(trip: Belief) -> list[W.Flight] | None:
    """The flights on the stated route and exact dates that meet the stated preferences; None until
    the route and both dates are stated."""
    if not (trip.route_known() and trip.dates_known()):
        return None
    found = W.search_flights(trip.origin, trip.destination, trip.month, trip.dep_day, trip.ret_day, window=0)
    return [f for f in found if meets_preferences(trip.prefs, f)]


class AirlineKnowledgeChecked(AirlineKnowledgeAndRequests):
    """The table and the requests, and ``refutes(reply, user_texts)``: whether the table or the
    reservation book, searched with the trip and name the customer stated, contradicts the reply's
    final action. What is not yet stated refutes nothing."""

    def refutes(self, reply: str, user_texts: tuple[str, ...]) -> bool:
        action = read_action(reply)
        if action is None or action.status == "none":
            return False
        trip = stated_trip(user_texts)
        # the book's check of the action's own name (lookup), under the name the customer gave
        if trip.name is not None and _book_contradicts(action.status, trip.name):
            return True
        if action.status not in ("no_flight", "book", "change") or (wanted := stated_flights(trip)) is None:
            return False
        if action.status == "no_flight":
            return bool(wanted)
        # a flight off the stated route, dates or preferences; which of the right ones is the
        # table's best is the rating's business, not a contradiction. A booking without a flight
        # (a slipped status) is the request check's to flag.
        return action.flight is not None and action.flight not in {f.number for f in wanted}


class AirlineKnowledgeCheckedEveryTurn(AirlineKnowledgeChecked):
    """``AirlineKnowledgeChecked``, and a reply without a final action is refuted as well when it
    carries on with a change or a cancellation (asks for the trip, proposes a flight, asks to
    confirm the cancellation) that the customer asked for under a name the book does not hold.

    Why before the final action: ENIGMA reads a target's reply at the logged states, one turn at a
    time. A seller that never checks the book goes on at the state where a careful seller said "no
    reservation" and ended the logged dialogue; its wrong change or cancellation would come a turn
    or two later, at states the logs do not have. Its next reply is the only one ENIGMA sees, and
    only the book says that it is already a wrong move. Asking for the name again is not refuted
    (``name_asks_refuted=False``): it presumes nothing the book contradicts, and a seller that did
    not hear the name may still answer "no reservation" next."""

    def __init__(self, name_asks_refuted: bool = False) -> None:
        self.name_asks_refuted = name_asks_refuted

    def refutes(self, reply: str, user_texts: tuple[str, ...]) -> bool:
        said = read_agent(reply)
        if said.action is not None:
            return super().refutes(reply, user_texts)
        trip = stated_trip(user_texts)
        # the request held against the book as the change or cancellation it asks for would be
        if trip.intent is None or trip.name is None or not _book_contradicts(trip.intent, trip.name):
            return False
        return self.name_asks_refuted or said.proposal is not None or bool(said.asks - {"name"})


def airline() -> AirlineKnowledge:
    return AirlineKnowledge()


def airline_requests() -> AirlineKnowledgeAndRequests:
    return AirlineKnowledgeAndRequests()


def airline_checked() -> AirlineKnowledgeChecked:
    return AirlineKnowledgeChecked()


def airline_checked_every_turn() -> AirlineKnowledgeCheckedEveryTurn:
    return AirlineKnowledgeCheckedEveryTurn()


def airline_checked_every_turn_name_asks() -> AirlineKnowledgeCheckedEveryTurn:
    """A studied variant: asking for the name again is refuted as well (studies/results/ope_every_turn_*)."""
    return AirlineKnowledgeCheckedEveryTurn(name_asks_refuted=True)
