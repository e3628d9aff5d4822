"""The simulated customer says only what its goal says and judges proposals by it."""

from __future__ import annotations

import pytest

from enigma.sim import world as W
from enigma.sim.customer import Customer
from enigma.sim.goals import Goal, knowledge_base, satisfies
from enigma.sim.language import read_customer
from enigma.sim.rng import rng
from enigma.sim.rollout import goal_for, rollout
from enigma.sim.seller_presets import preset_agents
from enigma.sim.sellers import make_seller

_ASK_ALL = "Could I have your full name? Where are you flying from and to, and on which dates? Any preferences?"


def _check_consistent(goal: Goal, text: str) -> None:
    f = read_customer(text)
    if f.name is not None:
        assert f.name == goal.name, text
    if goal.intent != "cancel":
        assert f.origin in (None, goal.origin), text
        assert f.destination in (None, goal.destination), text
        for date, day in ((f.dep, goal.dep_day), (f.ret, goal.ret_day)):
            if date is not None:
                assert date[1] == day and date[0] in (None, goal.month), text
    for key, value in f.prefs:
        assert goal.constraints.get(key) == value, (text, key, goal)
    if f.intent is not None:
        assert f.intent == goal.intent, text


def test_customer_answers_agree_with_goal():
    for seed in range(300):
        goal = goal_for(seed)
        c = Customer(goal, rng(seed, "c"), noise=0.5)
        _check_consistent(goal, c.opening())
        _check_consistent(goal, c.react(_ASK_ALL))


def test_every_customer_turn_in_rollouts_agrees_with_goal():
    for agent_id in ("expert", "hard_of_hearing", "worst", "random_picker"):
        agent = make_seller(agent_id)
        for seed in range(40):
            ro = rollout(agent, seed)
            for t in ro.turns:
                if t.role == "user":
                    _check_consistent(ro.goal, t.text)


def test_customer_accepts_exactly_the_flights_that_meet_its_goal():
    n_accept = n_reject = 0
    for seed in range(60):
        goal = goal_for(seed)
        if goal.intent == "cancel":
            continue
        for f in knowledge_base(goal)[::3]:
            c = Customer(goal, rng(seed, "judge", f.number))
            reply = read_customer(c.react(f"I found flight {f.number}. Shall I book it?"))
            if satisfies(goal, f):
                assert reply.accept and not reply.reject
                n_accept += 1
            else:
                assert reply.reject and not reply.accept
                n_reject += 1
    assert n_accept > 5 and n_reject > 50


def test_rejection_names_what_is_wrong():
    table = W.timetable("BOS", "DEN", 5)
    same_dates = sorted((f for f in table if (f.dep_day, f.ret_day) == (table[0].dep_day, table[0].ret_day)),
                        key=lambda f: f.price)  # fmt: skip
    cheap, dear = same_dates[0], same_dates[-1]
    assert dear.price > cheap.price
    goal = Goal("book", "Emily Clark", "BOS", "DEN", 5, cheap.dep_day, cheap.ret_day, max_price=cheap.price)
    said = read_customer(Customer(goal, rng(0)).react(f"How about flight {dear.number}?"))
    assert said.reject and dict(said.prefs) == {"max_price": cheap.price}
    wrong_route = W.timetable("DEN", "BOS", 5)[0]
    said = read_customer(Customer(goal, rng(0)).react(f"How about flight {wrong_route.number}?"))
    assert said.reject and (said.origin, said.destination) == ("BOS", "DEN")
    other_dates = next(f for f in table if f.dep_day != cheap.dep_day)
    said = read_customer(Customer(goal, rng(0)).react(f"How about flight {other_dates.number}?"))
    assert said.reject and said.dep == (5, cheap.dep_day) and said.ret == (5, cheap.ret_day)
    assert read_customer(Customer(goal, rng(0)).react(f"How about flight {cheap.number}?")).accept


def test_customer_leaves_after_too_many_bad_proposals():
    goal = next(goal_for(s) for s in range(100) if goal_for(s).intent == "book")
    wrong = W.timetable(goal.destination, goal.origin, goal.month)[0].number
    c = Customer(goal, rng(0))
    for _ in range(10):
        c.react(f"Flight {wrong}, OK?")
        if c.done:
            break
    assert c.done


@pytest.mark.parametrize("preset", ["airline24", "rule6"])
def test_dialogues_are_short_enough_for_padding(preset):
    for agent_id in preset_agents(preset):
        agent = make_seller(agent_id)
        for seed in range(15):
            assert rollout(agent, seed).n_agent_turns <= 8
