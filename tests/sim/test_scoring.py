"""AirDialogue scoring rules on hand-made cases, special cases included."""

from __future__ import annotations

import dataclasses

import pytest

from enigma.sim import world as W
from enigma.sim.goals import Goal, expected_outcome, knowledge_base
from enigma.sim.scoring import Action, flight_distance, flight_score, name_f1, score


def _goal(intent="book", name="Emily Clark", **prefs) -> Goal:
    f = W.timetable("BOS", "DEN", 3)[8]
    return Goal(intent, name, "BOS", "DEN", 3, f.dep_day, f.ret_day, **prefs)


def _name_with_reservation(want: bool) -> str:
    for first in W.FIRST_NAMES:
        for last in W.LAST_NAMES:
            if (W.reservation_for(f"{first} {last}") is not None) == want:
                return f"{first} {last}"
    raise AssertionError("no such name")


def test_name_f1_tokens_case_and_punctuation():
    assert name_f1("Emily Clark", "emily clark.") == 1.0
    assert name_f1("Emily", "Emily Clark") == pytest.approx(2 / 3)
    assert name_f1("Clark Emily", "Emily Clark") == 1.0
    assert name_f1("John Smith", "Emily Clark") == 0.0
    assert name_f1("", "Emily Clark") == 0.0


def test_flight_distance_hand_computed():
    a = W.timetable("BOS", "DEN", 3)[0]
    same_class = "Delta" if not a.low_cost else "Spirit"
    b = dataclasses.replace(
        a, dep_day=a.dep_day + 3, dep_hour=a.dep_hour - 6 if a.dep_hour > 6 else a.dep_hour + 6,
        price=a.price * 2, airline=same_class, cabin="business" if a.cabin == "economy" else "economy",
    )
    # days 3/31, hours 6/24, price |2p - p| / p = 1 (capped), cabin mismatch 1; airline same cost class
    expected = (3 / 31 + 6 / 24 + 1 + 1) / 12
    assert flight_distance(a, b) == pytest.approx(expected)
    assert flight_distance(a, a) == 0.0


def test_flight_score_special_cases():
    kb = W.timetable("BOS", "DEN", 3)
    correct = (kb[0].number,)
    assert flight_score(None, (), kb) == 1.0  # nothing to book, nothing booked
    assert flight_score(kb[3].number, (), kb) == 0.0  # nothing to book, booked something
    assert flight_score(None, correct, kb) == 0.0  # should book, booked nothing
    assert flight_score(kb[0].number, correct, kb) == 1.0
    other_route = W.timetable("DEN", "BOS", 3)[0].number
    assert flight_score(other_route, correct, kb) == 0.0  # not in the knowledge base
    worst = max(kb, key=lambda f: flight_distance(f, kb[0]))
    assert flight_score(worst.number, correct, kb) == pytest.approx(0.0)
    mid = flight_score(kb[1].number, correct, kb)
    d = flight_distance(kb[1], kb[0]) / flight_distance(worst, kb[0])
    assert mid == pytest.approx(1 - d) and 0 < mid < 1


def test_reward_weights_and_book_case():
    g = _goal()
    out = expected_outcome(g)
    assert out.status == "book" and out.flights
    s = score(g, Action("book", out.flights[0], "Emily Clark"))
    assert s == {"reward": 1.0, "name": 1.0, "flight": 1.0, "status": 1.0}
    s = score(g, Action("change", out.flights[0], "Emily"))
    assert s["status"] == 0.0 and s["flight"] == 1.0
    assert s["reward"] == pytest.approx(0.2 * (2 / 3) + 0.5)
    assert score(g, Action("none", None, ""))["reward"] == 0.0


def test_no_flight_case():
    g = _goal(max_price=1, cabin="business")  # nothing costs $1
    out = expected_outcome(g)
    assert out.status == "no_flight" and out.flights == ()
    assert score(g, Action("no_flight", None, g.name))["reward"] == 1.0
    booked = score(g, Action("book", knowledge_base(g)[0].number, g.name))
    assert booked["flight"] == 0.0 and booked["status"] == 0.0 and booked["reward"] == pytest.approx(0.2)


def test_reservation_cases():
    without = _goal("change", _name_with_reservation(False))
    assert expected_outcome(without).status == "no_reservation"
    assert score(without, Action("no_reservation", None, without.name))["reward"] == 1.0
    with_res = _goal("cancel", _name_with_reservation(True))
    out = expected_outcome(with_res)
    assert out.status == "cancel" and out.flights == ()
    assert score(with_res, Action("cancel", None, with_res.name))["reward"] == 1.0
    assert score(with_res, Action("no_reservation", None, with_res.name))["reward"] == pytest.approx(0.7)


def test_correct_flight_is_cheapest_meeting_constraints():
    g = _goal(max_connections=2)
    out = expected_outcome(g)
    same_dates = [f for f in knowledge_base(g) if (f.dep_day, f.ret_day) == (g.dep_day, g.ret_day)]
    assert len(same_dates) == W.FLIGHTS_PER_DATE
    cheapest = min(f.price for f in same_dates)
    assert {W.flight_by_number(n).price for n in out.flights} == {cheapest}


def test_bad_action_status_rejected():
    with pytest.raises(ValueError, match="action status"):
        Action("refund", None, "x")
