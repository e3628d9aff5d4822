"""Seller agents: runnable through agent specs, deterministic, and acting from the text alone,
including at states from other agents' dialogues."""

from __future__ import annotations

import pytest

from enigma.contracts import Agent
from enigma.dialogue import Turn
from enigma.sim import sellers
from enigma.sim.goals import expected_outcome
from enigma.sim.language import read_action, read_agent
from enigma.sim.rollout import goal_for, rollout
from enigma.sim.seller_presets import AIRLINE24, RULE6, preset_agents
from enigma.sim.sellers import make_seller


def _states(turns):
    """Every logged state at which an agent speaks: the history before each agent turn."""
    return [list(turns[:i]) for i, t in enumerate(turns) if t.role == "agent"]


def test_presets_and_specs():
    assert len(preset_agents("airline24")) >= 24
    assert preset_agents("rule6") == list(RULE6) and len(RULE6) == 6
    assert [RULE6[a].intent_noise for a in RULE6] == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    with pytest.raises(ValueError, match="unknown simulator preset"):
        preset_agents("nope")
    from enigma.agents import load_agent

    agent = load_agent("python:enigma.sim.sellers:expert")
    assert isinstance(agent, Agent) and agent.agent_id == "expert"
    with pytest.raises(AttributeError):
        sellers.not_an_agent  # noqa: B018


def test_same_seed_same_reply_and_seeds_vary_wording():
    agent = make_seller("expert")
    history = [Turn("user", "Hi, I'd like to book a flight.")]
    assert agent.respond(history, seed=7) == agent.respond(history, seed=7)
    replies = {agent.respond(history, seed=s)[0] for s in range(20)}
    assert len(replies) >= 2  # two phrasings of the name question
    assert all("name" in read_agent(r).asks for r in replies)
    many = agent.respond(history, n=5, seed=3)
    assert len(many) == 5 and many == agent.respond(history, n=5, seed=3)


def test_agents_act_on_states_from_other_agents_dialogues():
    logged = [rollout(make_seller(a), seed) for a in ("worst", "chatterbox", "expert_verbose") for seed in range(6)]
    for agent_id in list(AIRLINE24) + list(RULE6):
        agent = make_seller(agent_id)
        for ro in logged:
            for state in _states(ro.turns):
                reply = agent.respond(state, n=1, seed=11)
                assert isinstance(reply[0], str) and reply[0].strip()
                assert reply == agent.respond(state, n=1, seed=11)


def test_expert_finishes_a_dialogue_another_agent_started():
    # Replay another agent's logged dialogue up to the customer's acceptance of a proposal:
    # the expert, reading only that text, books the accepted flight.
    found = 0
    for seed in range(60):
        ro = rollout(make_seller("first_fit_terse"), seed)
        if ro.action.status not in ("book", "change") or ro.action.flight is None:
            continue
        state = list(ro.turns[:-1])  # everything before the final action
        reply = make_seller("expert").respond(state, seed=0)[0]
        action = read_action(reply)
        assert action is not None and action.flight == ro.action.flight, (state, reply)
        assert action.status == ro.action.status
        found += 1
    assert found >= 10


def test_expert_proposes_the_correct_flight_once_it_knows_everything():
    for seed in range(80):
        goal = goal_for(seed)
        out = expected_outcome(goal)
        if out.status not in ("book", "change") or goal.intent != "book":
            continue
        prefs = []
        if goal.dep_window:
            prefs.append(f"a {goal.dep_window} departure")
        if goal.ret_window:
            prefs.append(f"coming back in the {goal.ret_window}")
        if goal.cabin:
            prefs.append(f"{goal.cabin} class")
        if goal.max_price is not None:
            prefs.append(f"my budget is ${goal.max_price}")
        if goal.max_connections == 0:
            prefs.append("nonstop only")
        elif goal.max_connections == 1:
            prefs.append("at most one stop")
        if goal.normal_airline_only:
            prefs.append("no budget airlines")
        from enigma.sim import world as W
        from enigma.sim.language import fmt_date

        history = [
            Turn("user", f"Hi, I'd like to book a flight. My name is {goal.name}."),
            Turn("agent", "Where are you flying from and to, and on which dates?"),
            Turn("user", f"From {W.AIRPORTS[goal.origin]} to {W.AIRPORTS[goal.destination]}. Leaving "
                         f"{fmt_date(goal.month, goal.dep_day)}, returning {fmt_date(goal.month, goal.ret_day)}."),
            Turn("agent", "Do you have any preferences?"),
            Turn("user", (", ".join(prefs) + ".") if prefs else "No particular preferences."),
        ]  # fmt: skip
        facts = read_agent(make_seller("expert").respond(history, seed=seed)[0])
        assert facts.proposal in out.flights, (goal, facts)


def test_intent_noise_changes_behaviour_only_in_intent():
    # rule6 agents differ only in intent noise: with the intent unambiguous they ask the same thing.
    history = [Turn("user", "My name is Emily Clark.")]
    replies = {make_seller(a).respond(history, seed=1)[0] for a in RULE6}
    assert len(replies) == 1


def test_bad_knobs_rejected():
    with pytest.raises(ValueError, match="unknown style"):
        sellers.variant("expert", style="rude")
    with pytest.raises(ValueError, match="unknown seller agent"):
        make_seller("nobody")


def test_a_sellers_fingerprint_follows_its_knobs_and_its_wording(monkeypatch):
    """The python kind fingerprints a seller by its module's source, and the knobs and the wording
    live in modules of their own (seller_presets, seller_words): the seller reports both, so a
    change to either is a new fingerprint (and its cached samples are not reused)."""
    from enigma.agents import fingerprint
    from enigma.sim.seller_words import STYLES

    spec = "python:enigma.sim.sellers:expert"
    base = fingerprint(spec, make_seller("expert"))
    assert fingerprint(spec, make_seller("expert")) == base
    assert fingerprint(spec, sellers.variant("expert", give_up=0.5)) != base
    monkeypatch.setitem(STYLES["polite"], "closing", ("Bye.",))
    assert fingerprint(spec, make_seller("expert")) != base
