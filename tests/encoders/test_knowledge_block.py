"""The knowledge block (``dice.knowledge``): what the facts a reply looks up in a knowledge base
say against the user's words, with the airline world as the base (``enigma.sim.knowledge``)."""

from __future__ import annotations

import itertools

import pytest

from enigma.dialogue import Turn
from enigma.encoders.base import DialogueActions
from enigma.encoders.agreement import AGREEMENT_DIM
from enigma.encoders.frozen import FrozenPairEncoder
from enigma.encoders.grounding import GROUNDING_DIM
from enigma.encoders.knowledge import KNOWLEDGE_DIM, Lookup, knowledge_features, knowledge_measures, load_knowledge, unrequested
from enigma.encoders.text_cache import EmbeddingCache
from enigma.ope.config import DiceConfig
from enigma.sim import world as W
from enigma.sim.knowledge import (
    airline,
    airline_checked,
    airline_checked_every_turn,
    airline_checked_every_turn_name_asks,
    airline_requests,
    stated_trip,
)
from enigma.sim.language import fmt_action, read_action
from enigma.sim.sellers import make_seller

KB = airline()
FLIGHT = W.timetable("BOS", "DEN", 9)[0]  # Boston to Denver in September
ELSEWHERE = W.timetable("BOS", "DFW", 9)[0]  # Boston to Dallas


def _name(holds: bool) -> str:
    return next(f"{a} {b}" for a, b in itertools.product(W.FIRST_NAMES, W.LAST_NAMES)
                if (W.reservation_for(f"{a} {b}") is not None) == holds)


HOLDER, NOBODY = _name(True), _name(False)


def _user_words(*turns: str) -> frozenset[str]:
    from enigma.encoders.grounding import Mentioned

    said = Mentioned()
    said.extend([Turn("user", t) for t in turns])
    return frozenset(said.words)


ASKED = _user_words(f"i want to fly from boston to denver, out on september {FLIGHT.dep_day}th "
                    f"and back on the {FLIGHT.ret_day}th. i am {HOLDER}")


def test_a_booking_of_the_flight_the_user_asked_for_has_every_fact_said():
    booked = f"Booked. {fmt_action('book', FLIGHT.number, HOLDER)}"
    assert knowledge_features(KB.lookup(booked), ASKED) == [1.0, 0.0, 0.0]


def test_a_booking_on_a_route_nobody_said_is_told_by_its_facts():
    """The reply says only a flight number: which route it is is in the table."""
    look = KB.lookup(f"Your ticket on flight {ELSEWHERE.number} has been booked. {fmt_action('book', ELSEWHERE.number, HOLDER)}")
    assert look.found == 2  # the flight once (the text and the tag name the same one), the name
    assert look.facts[:2] == (("boston",), ("dallas",))  # then the month, by name or number, and the two days
    said = [any(all(w in ASKED for w in s.split()) for s in fact) for fact in look.facts]
    assert said[:3] == [True, False, True]  # the user said Boston and September, never Dallas
    assert knowledge_features(look, ASKED) == [1.0, said.count(False) / 5, 0.0]


def test_a_month_said_as_a_number_counts_as_said():
    numeric = _user_words(f"boston to denver, {FLIGHT.dep_month}/{FLIGHT.dep_day} to {FLIGHT.ret_month}/{FLIGHT.ret_day}")
    assert knowledge_features(KB.lookup(f"flight {FLIGHT.number}"), numeric)[1] == 0.0


@pytest.mark.parametrize(
    "reply, contradicted",
    [
        (fmt_action("cancel", None, NOBODY), 1.0),  # cancels a reservation the book does not hold
        (fmt_action("change", FLIGHT.number, NOBODY), 1.0),
        (fmt_action("cancel", None, HOLDER), 0.0),
        (fmt_action("no_reservation", None, HOLDER), 1.0),  # says there is none where there is one
        (fmt_action("no_reservation", None, NOBODY), 0.0),
        (fmt_action("book", 999999, HOLDER), 1.0),  # a flight number the timetable does not have
    ],
)
def test_the_reservation_book_and_the_timetable_contradict_wrong_claims(reply, contradicted):
    assert knowledge_features(KB.lookup(reply), ASKED)[2] == contradicted


def test_prices_and_other_numbers_are_not_flights_and_a_reply_without_facts_is_zeros():
    assert KB.lookup("That is $1290, or 2 stops, leaving at 13:00 on 9/12.") == Lookup()
    assert knowledge_features(Lookup(), ASKED) == [0.0, 0.0, 0.0]


D = DialogueActions(
    "d",
    (
        Turn("user", "hello, i want to fly from boston to denver"),
        Turn("agent", "Which dates?"),
        Turn("user", f"september {FLIGHT.dep_day} to {FLIGHT.ret_day}. i am {HOLDER}"),
        Turn("agent", f"Done. {fmt_action('book', FLIGHT.number, HOLDER)}"),
    ),
    (1, 3),
    (("Your name?",), (f"Done. {fmt_action('book', ELSEWHERE.number, HOLDER)}", f"Done. {fmt_action('cancel', None, NOBODY)}")),
)


@pytest.fixture()
def cache(tiny_model_dir, tmp_path):
    return EmbeddingCache(str(tiny_model_dir), tmp_path, progress=False)


def test_the_encoder_lays_the_block_out_per_pair_beside_the_grounding_block(cache):
    enc = FrozenPairEncoder(cache, grounding=True, agreement=True, knowledge=KB)
    assert enc.pair_passthrough_dim == GROUNDING_DIM + KNOWLEDGE_DIM
    assert enc.passthrough_dim == GROUNDING_DIM + KNOWLEDGE_DIM + AGREEMENT_DIM
    prepared = enc.prepare([D], max_agent_turns=2)
    k = prepared.knowledge  # [T, 1 + S, KNOWLEDGE_DIM]: the logged reply, then the target's samples
    assert k.shape == (2, 3, KNOWLEDGE_DIM)
    assert k[0].abs().sum() == 0  # no reply of the first turn names anything
    assert k[1, 0].tolist() == [1.0, 0.0, 0.0]  # the flight the user asked for
    assert k[1, 1, 1] > 0 and k[1, 1, 2] == 0  # another route: facts nobody said
    assert k[1, 2].tolist() == [1.0, 0.0, 1.0]  # a cancellation the book does not hold
    logged, target = enc(prepared, __import__("torch").tensor([0]))
    start = enc.dim - AGREEMENT_DIM - KNOWLEDGE_DIM
    assert target[0, 1, 1, start:start + KNOWLEDGE_DIM].tolist() == [1.0, 0.0, 1.0]


@pytest.mark.parametrize(
    "asked, action, flagged",
    [
        ("Hi, I'd like to book a flight.", fmt_action("cancel", None, HOLDER), 1.0),  # status_sloppy's slip
        ("Hi, I'd like to book a flight.", fmt_action("change", FLIGHT.number, HOLDER), 1.0),
        ("Hi, I'd like to book a flight.", fmt_action("book", FLIGHT.number, HOLDER), 0.0),
        ("Hi, I'd like to book a flight.", fmt_action("no_flight", None, HOLDER), 0.0),  # answers a booking
        ("Hello, please cancel my reservation.", fmt_action("no_flight", None, HOLDER), 1.0),
        ("Hello, please cancel my reservation.", fmt_action("no_reservation", None, NOBODY), 0.0),
        ("Hi, I need to move my flight to different dates.", fmt_action("change", FLIGHT.number, HOLDER), 0.0),
        ("Hi, I need to move my flight to different dates.", "Which dates would you like?", 0.0),  # no action
        ("My name is Eric.", fmt_action("cancel", None, HOLDER), 0.0),  # nothing asked yet: no claim
    ],
)
def test_an_action_of_another_kind_than_the_user_asked_for_is_flagged(asked, action, flagged):
    kb = airline_requests()
    assert unrequested(kb.lookup(action), kb.request(asked)) == flagged


def test_only_a_base_that_reads_requests_adds_the_fourth_column(cache):
    assert knowledge_measures(KB) == ("names_known", "facts_unsaid", "contradicted")
    assert knowledge_measures(airline_requests()) == (*knowledge_measures(KB), "unrequested")
    table = FrozenPairEncoder(cache, knowledge=KB).prepare([D], max_agent_turns=2).knowledge
    both = FrozenPairEncoder(cache, knowledge=airline_requests()).prepare([D], max_agent_turns=2).knowledge
    assert both.shape == (2, 3, KNOWLEDGE_DIM + 1)
    assert (both[..., :KNOWLEDGE_DIM] == table).all()  # the table's three columns are the same
    assert both[..., KNOWLEDGE_DIM].tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]  # D's user never asks


def test_the_latest_request_the_user_states_is_the_one_an_action_is_held_against(cache):
    """A customer corrects a seller that misread them; the correction is what counts."""
    d = DialogueActions(
        "d",
        (
            Turn("user", "Hi, I need to change my reservation."),
            Turn("agent", "Sure, may I have your name?"),
            Turn("user", "No, I need a new flight. I want to book a ticket."),
            Turn("agent", f"Done. {fmt_action('change', FLIGHT.number, HOLDER)}"),
        ),
        (1, 3),
        ((f"Done. {fmt_action('change', FLIGHT.number, HOLDER)}",), (f"Done. {fmt_action('book', FLIGHT.number, HOLDER)}",)),
    )
    k = FrozenPairEncoder(cache, knowledge=airline_requests()).prepare([d], max_agent_turns=2).knowledge
    assert k[0, 1, KNOWLEDGE_DIM] == 0.0  # a change, while the customer asks for a change, fits; ...
    assert k[1, 0, KNOWLEDGE_DIM] == 1.0 and k[1, 1, KNOWLEDGE_DIM] == 0.0  # ... after the correction only a booking does


TRIP = (f"i want to fly from boston to denver, out on september {FLIGHT.dep_day}th and back on the {FLIGHT.ret_day}th.",
        f"my name is {HOLDER}.")
NOTHING_FITS = "my budget is $200 and i want business class."  # the dates' business seats cost more


@pytest.mark.parametrize(
    "said, action, refuted",
    [
        (TRIP, fmt_action("no_flight", None, HOLDER), True),  # the table holds the stated trip
        ((*TRIP, NOTHING_FITS), fmt_action("no_flight", None, HOLDER), False),  # none meets the preferences
        (TRIP[1:], fmt_action("no_flight", None, HOLDER), False),  # no trip stated yet: nothing to search
        (TRIP, fmt_action("no_reservation", None, HOLDER), True),  # the book holds the stated name
        ((f"my name is {NOBODY}.",), fmt_action("no_reservation", None, NOBODY), False),
        ((f"my name is {NOBODY}.",), fmt_action("cancel", None, NOBODY), True),  # nothing to cancel
        (TRIP, fmt_action("cancel", None, HOLDER), False),
        (TRIP, fmt_action("book", FLIGHT.number, HOLDER), False),
        (TRIP, fmt_action("book", ELSEWHERE.number, HOLDER), True),  # off the stated route
        ((*TRIP, NOTHING_FITS), fmt_action("book", FLIGHT.number, HOLDER), True),  # off the stated budget
        (TRIP, fmt_action("book", None, HOLDER), False),  # no flight: the request check's to flag
        (TRIP, "Which dates would you like?", False),  # no action, no claim
    ],
)
def test_a_final_action_the_users_own_words_contradict_is_refuted(said, action, refuted):
    assert airline_checked().refutes(action, said) is refuted


@pytest.mark.parametrize(
    "said, action, refuted",
    [
        (TRIP, fmt_action("no_flight", None, HOLDER), True),  # the final actions: as airline_checked
        ((f"my name is {NOBODY}.",), fmt_action("cancel", None, NOBODY), True),
        ((f"my name is {NOBODY}.",), fmt_action("no_reservation", None, NOBODY), False),
        (("please cancel my reservation.", f"my name is {NOBODY}."), "Where are you flying from?", True),  # no reservation to go on with
        (("i need to change my flight.", f"my name is {NOBODY}."), "Which dates would you like?", True),
        (("please cancel my reservation.", f"my name is {HOLDER}."), "Shall I cancel it?", False),  # the book holds it
        (("please cancel my reservation.",), "May I have your name?", False),  # no name stated yet
        (("i want to book a flight.", f"my name is {NOBODY}."), "Where are you flying from?", False),  # a booking needs none
        (("please cancel my reservation.", f"my name is {NOBODY}."), "Could I have your full name?", False),  # presumes nothing
    ],
)
def test_a_reply_that_carries_on_with_what_the_book_cannot_hold_is_refuted(said, action, refuted):
    assert airline_checked_every_turn().refutes(action, said) is refuted


def test_the_studied_variant_refutes_asking_for_the_name_again_as_well():
    said = ("please cancel my reservation.", f"my name is {NOBODY}.")
    assert airline_checked_every_turn_name_asks().refutes("Could I have your full name?", said)
    assert not airline_checked_every_turn_name_asks().refutes(fmt_action("no_reservation", None, NOBODY), said)


@pytest.mark.parametrize("seller, refuted", [("trusting", True), ("expert", False)])
def test_a_seller_that_never_checks_the_book_is_refuted_a_turn_before_its_wrong_cancellation(seller, refuted):
    """The sellers' own replies at the state where the careful one says "no reservation": the one
    that never checks asks to confirm a cancellation the book cannot hold, and only the every-turn
    check sees it (airline_checked waits for the final action, which the logs never reach)."""
    history = (Turn("user", "Hello, please cancel my reservation."), Turn("agent", "May I have your name, please?"),
               Turn("user", f"My name is {NOBODY}."))
    reply = make_seller(seller).respond(history, n=1, seed=0)[0]
    said = tuple(t.text for t in history if t.role == "user")
    assert (read_action(reply) is None) is refuted  # trusting goes on; expert ends with "no reservation"
    assert airline_checked_every_turn().refutes(reply, said) is refuted
    assert not airline_checked().refutes(reply, said)


def test_a_name_the_agent_misheard_is_caught_by_the_users_words_not_by_the_reply_alone():
    """hard_of_hearing's failure: it hears another name, finds no reservation under it and says so.
    The book agrees with the reply's own name; only the name the customer gave refutes it."""
    misheard = fmt_action("no_reservation", None, NOBODY)
    assert knowledge_features(airline_checked().lookup(misheard), ASKED)[2] == 0.0  # not contradicted by itself
    assert airline_checked().refutes(misheard, TRIP)


def test_a_later_statement_of_a_slot_replaces_the_earlier_one():
    trip = stated_trip((*TRIP, "sorry, i meant to dallas."))
    assert (trip.origin, trip.destination, trip.month, trip.dep_day) == ("BOS", "DFW", 9, FLIGHT.dep_day)
    assert trip.name == HOLDER
    assert airline_checked().refutes(fmt_action("book", FLIGHT.number, HOLDER), (*TRIP, "sorry, i meant to dallas."))


def test_only_a_base_that_searches_with_the_users_words_adds_the_fifth_column(cache):
    d = DialogueActions(
        "d",
        (Turn("user", TRIP[0]), Turn("agent", "Your name?"), Turn("user", TRIP[1]),
         Turn("agent", f"Sorry. {fmt_action('no_flight', None, HOLDER)}")),
        (1, 3),
        (("Your name?",), (f"Booked. {fmt_action('book', FLIGHT.number, HOLDER)}",)),
    )
    assert knowledge_measures(airline_checked()) == (*knowledge_measures(airline_requests()), "refuted")
    four = FrozenPairEncoder(cache, knowledge=airline_requests()).prepare([d], max_agent_turns=2).knowledge
    five = FrozenPairEncoder(cache, knowledge=airline_checked()).prepare([d], max_agent_turns=2).knowledge
    assert five.shape == (2, 2, KNOWLEDGE_DIM + 2)
    assert (five[..., :KNOWLEDGE_DIM + 1] == four).all()
    # the logged "no flights" on a trip the table holds is refuted; the target's booking of it is not
    assert five[..., KNOWLEDGE_DIM + 1].tolist() == [[0.0, 0.0], [1.0, 0.0]]


@pytest.mark.parametrize(
    "spec, says",
    [
        ("enigma.sim.knowledge:airline", "expected 'python:<module>:<factory>'"),
        ("python:enigma.no_such_module:airline", "cannot import module 'enigma.no_such_module'"),
        ("python:enigma.sim.knowledge:nothing", "has no callable 'nothing'"),
        ("python:enigma.sim.knowledge:Lookup", "which has no lookup(reply)"),
    ],
)
def test_a_spec_that_names_no_knowledge_base_is_a_clear_error(spec, says):
    with pytest.raises(ValueError, match=r".*") as err:
        load_knowledge(spec)
    assert says in str(err.value) and spec in str(err.value)


def test_the_setting_needs_the_frozen_encoder_and_a_python_spec():
    with pytest.raises(ValueError, match="knowledge is a block of the frozen encoder"):
        DiceConfig(encoder="finetune", solver="gda", knowledge="python:enigma.sim.knowledge:airline")
    with pytest.raises(ValueError, match="knowledge"):
        DiceConfig(knowledge="enigma/sim/knowledge.py")
    assert DiceConfig(encoder="onehot", knowledge="python:enigma.sim.knowledge:airline").frozen is None


def test_a_retrieved_action_is_held_to_the_customer_it_answered(cache):
    """A stand-in's final action, retrieved with its own conversation (``transcripts.sources``),
    is checked against that conversation's customer: booking Dallas for a customer who asked for
    Dallas is right there, though the logged customer asked for Denver; without its source it is
    read against the logged customer, as before."""
    import json

    dallas = f"i want to fly from boston to dallas, out on september {ELSEWHERE.dep_day}th and back on the {ELSEWHERE.ret_day}th."
    source = json.dumps([["user", dallas], ["agent", "Your name?"], ["user", f"my name is {HOLDER}."]])
    retrieved = f"Booked. {fmt_action('book', ELSEWHERE.number, HOLDER)}"
    turns = (Turn("user", TRIP[0]), Turn("agent", "Your name?"), Turn("user", TRIP[1]),
             Turn("agent", f"Booked. {fmt_action('book', FLIGHT.number, HOLDER)}"))
    plain = DialogueActions("d", turns, (1, 3), (("Your name?",), (retrieved,)))
    sourced = DialogueActions("d", turns, (1, 3), (("Your name?",), (retrieved,)), ((None,), (source,)))
    enc = FrozenPairEncoder(cache, knowledge=airline_checked())
    off, on = enc.prepare([plain], max_agent_turns=2).knowledge, enc.prepare([sourced], max_agent_turns=2).knowledge
    assert off[1, 1, 1] > 0 and off[1, 1, KNOWLEDGE_DIM + 1] == 1.0  # Dallas unsaid and refuted by the Denver customer
    assert on[1, 1, 1] == 0.0 and on[1, 1, KNOWLEDGE_DIM + 1] == 0.0  # every fact said, nothing refuted, by its own
    assert (on[:, 0] == off[:, 0]).all() and (on[0] == off[0]).all()  # the logged replies and the sourceless sample
