"""The text readers agree with what each side says."""

from __future__ import annotations

import pytest

from enigma.sim import world as W
from enigma.sim.language import fmt_action, fmt_date, read_action, read_agent, read_customer
from enigma.sim.seller_words import STYLES
from enigma.sim.scoring import Action

_EXPECTED_ASK = {"intent": {"intent"}, "name": {"name"}, "route": {"route"}, "dates": {"dates"},
                 "route_dates": {"route", "dates"}, "prefs": {"prefs"}, "confirm_cancel": {"confirm_cancel"}}  # fmt: skip


@pytest.mark.parametrize("style", sorted(STYLES))
def test_every_seller_question_is_recognised(style):
    for key, wanted in _EXPECTED_ASK.items():
        for template in STYLES[style][key]:
            facts = read_agent(template.format(num=123456))
            assert wanted <= facts.asks, (style, key, template, facts)
            assert facts.proposal is None and facts.action is None


@pytest.mark.parametrize("style", sorted(STYLES))
def test_proposals_and_endings_are_recognised(style):
    for template in STYLES[style]["propose"]:
        text = template.format(num=104233, airline="Delta", dep="March 3", ret="March 7", dh="8 am", rh="5 pm",
                               cabin="economy", stops="nonstop", price=320)  # fmt: skip
        assert read_agent(text).proposal == 104233
    for key in ("give_up",):
        for template in STYLES[style][key]:
            assert read_agent(template).goodbye
    for key in ("filler",):
        for template in STYLES[style][key]:
            f = read_agent(template)
            assert not f.asks and not f.goodbye and f.proposal is None


def test_action_tag_round_trip_and_malformed():
    text = "Done. " + fmt_action("book", 104233, "Emily Clark")
    assert read_action(text) == Action("book", 104233, "Emily Clark")
    assert read_action("Cancelled. " + fmt_action("cancel", None, "Ava King")) == Action("cancel", None, "Ava King")
    assert read_action("I booked flight 104233 for you.") is None
    assert read_action("[action: refund | flight: none | name: x]").status == "none"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hi, I'd like to book a flight. I'm flying from Boston to Denver.",
         dict(intent="book", origin="BOS", destination="DEN")),
        ("From new york to las vegas, please.", dict(origin="JFK", destination="LAS")),
        ("No, I'm flying from Boston to Denver, not Miami.", dict(origin="BOS", destination="DEN", reject=True)),
        ("Departing Seattle, going to Atlanta.", dict(origin="SEA", destination="ATL")),
        ("I'd like to leave on March 3 and come back on March 7.", dict(dep=(3, 3), ret=(3, 7))),
        ("Out on the 3rd of March and back the 7th of March.", dict(dep=(3, 3), ret=(3, 7))),
        ("Leaving 3/3, returning 3/7", dict(dep=(3, 3), ret=(3, 7))),
        ("Um, my name is emily clark", dict(name="Emily Clark")),
        ("Good morning. Could you help me book a trip?", dict(intent="book", prefs=())),
        ("I want to cancel my trip.", dict(intent="cancel")),
        ("Hello, I'd like to modify my existing booking.", dict(intent="change")),
        ("Yes, that works for me.", dict(accept=True)),
        ("Well, perfect, go ahead", dict(accept=True)),
        ("Hmm no, I need to leave in the morning.", dict(reject=True, prefs=(("dep_window", "morning"),))),
        ("Anything works for me.", dict(no_prefs=True)),
    ],
)
def test_customer_reader_on_hand_made_utterances(text, expected):
    facts = read_customer(text)
    for key, value in expected.items():
        assert getattr(facts, key) == value, (text, key, facts)


def test_preferences_reader():
    facts = read_customer("A morning departure, coming back in the evening, business class, my budget is $500, "
                          "nonstop only and no budget airlines.")  # fmt: skip
    assert dict(facts.prefs) == {"dep_window": "morning", "ret_window": "evening", "cabin": "business",
                                 "max_price": 500, "max_connections": 0, "normal_airline_only": True}  # fmt: skip
    assert dict(read_customer("At most one stop.").prefs) == {"max_connections": 1}


@pytest.mark.parametrize("form", range(4))
def test_every_date_form_reads_back(form):
    for month, day in ((1, 1), (2, 22), (11, 13), (12, 31)):
        f = read_customer(f"Leaving {fmt_date(month, day, form)}, returning {fmt_date(month, day, form)}.")
        assert f.dep == (month, day) and f.ret == (month, day), (form, month, day, f)


def test_every_city_and_name_reads_back():
    for code, city in W.AIRPORTS.items():
        other = "BOS" if code != "BOS" else "SEA"
        assert read_customer(f"From {city} to {W.AIRPORTS[other]}.").origin == code
    for first in W.FIRST_NAMES:
        assert read_customer(f"It's {first} {W.LAST_NAMES[3]}.").name == f"{first} {W.LAST_NAMES[3]}"
