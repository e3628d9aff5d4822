"""The airline-heldout preset: its sellers, each new failure mode on a small case, the old
sellers untouched, and the preset's own reward mix in the ratings and the truth."""

from __future__ import annotations

import hashlib
import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from enigma.dialogue import Turn
from enigma.sim import world as W
from enigma.sim.generate import TRUTH_FILE, SimulateConfig, generate
from enigma.sim.language import fmt_date, read_action, read_agent
from enigma.sim.rollout import goal_for, rollout
from enigma.sim.scoring import AIRDIALOGUE_WEIGHTS, name_f1
from enigma.sim.seller_presets import AIRLINE24, HELDOUT, REWARD_WEIGHTS, RULE6, SellerKnobs, preset_agents
from enigma.sim.seller_words import RAMBLES
from enigma.sim.sellers import make_seller, variant
from enigma.store.experience import ExperienceStore

NAME = "Emily Clark"  # holds a reservation in the world's book
TRIP = "From Boston to Denver. Leaving March 3, returning March 7."


def _booking_until_proposal(agent_id: str = "expert") -> list[Turn]:
    """A booking in which every slot is known and the agent has just proposed a flight."""
    history = [
        Turn("user", f"Hi, I'd like to book a flight. My name is {NAME}."),
        Turn("agent", "Where are you flying from and to, and on which dates?"),
        Turn("user", TRIP),
        Turn("agent", "Do you have any preferences?"),
        Turn("user", "No particular preferences."),
    ]
    proposal = make_seller(agent_id).respond(history, seed=0)[0]
    assert read_agent(proposal).proposal is not None
    return history + [Turn("agent", proposal)]


def _accepted(times: int = 1) -> tuple[list[Turn], int]:
    history = _booking_until_proposal()
    flight = read_agent(history[-1].text).proposal
    for _ in range(times - 1):
        history += [Turn("user", "Yes, that works for me."), history[-1]]
    return history + [Turn("user", "Yes, that works for me.")], flight


def test_heldout_preset_lists_its_sellers():
    from enigma.agents import load_agent
    from enigma.cli import app

    agents = preset_agents("airline-heldout")
    assert agents == list(HELDOUT) and 12 <= len(agents) <= 16
    assert not set(agents) & (set(AIRLINE24) | set(RULE6))
    for a in agents:
        assert load_agent(f"python:enigma.sim.sellers:{a}").agent_id == a
    res = CliRunner().invoke(app, ["simulate", "--preset", "airline-heldout", "--out", "unused", "--list-agents"])
    assert res.exit_code == 0, res.output
    assert [line.split()[0] for line in res.output.splitlines()] == [f"python:enigma.sim.sellers:{a}" for a in agents]


def test_new_knobs_are_off_for_every_old_seller():
    new = ("switch_flight", "swap_change_cancel", "wrong_name", "ask_twice", "late_give_up", "drop_prefs",
           "eager_cancel", "mumble", "confirm_twice")  # fmt: skip
    for knobs in list(AIRLINE24.values()) + list(RULE6.values()):
        assert all(getattr(knobs, f) == getattr(SellerKnobs(), f) for f in new)
        assert knobs.choice != "priciest"
    assert not any(getattr(SellerKnobs(), f) for f in new)
    # every held-out seller but the near-expert has at least one failure mode no old seller has
    for a, knobs in HELDOUT.items():
        if a != "steady_hand":
            assert any(getattr(knobs, f) for f in new) or knobs.choice == "priciest", a


# sha256 of the dialogues below, computed before the held-out preset existed.
_OLD_SELLERS_DIGEST = "99a25568d13cc4157b64f403cd78eeab472d7c7b0798cccd7359dbf951eea20c"


def test_old_sellers_dialogues_unchanged():
    rows = []
    for a in list(AIRLINE24) + list(RULE6):
        for seed in range(3):
            ro = rollout(make_seller(a), seed)
            rows.append([a, seed, [[t.role, t.text] for t in ro.turns], ro.scores])
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()
    assert digest == _OLD_SELLERS_DIGEST


def test_switch_flight_books_another_flight_of_the_same_dates():
    history, accepted = _accepted()
    assert read_action(make_seller("expert").respond(history, seed=0)[0]).flight == accepted
    booked = read_action(variant("x", switch_flight=1.0).respond(history, seed=0)[0])
    assert booked.status == "book" and booked.flight != accepted
    a, b = W.flight_by_number(accepted), W.flight_by_number(booked.flight)
    trip = lambda f: (f.origin, f.destination, f.dep_month, f.dep_day, f.ret_day)  # noqa: E731
    assert trip(b) == trip(a)


def test_swap_change_cancel_confuses_only_change_and_cancel():
    seller = variant("x", swap_change_cancel=1.0)
    change = [Turn("user", f"Hi, I need to change my reservation. My name is {NAME}.")]
    cancel = [Turn("user", f"Hello, please cancel my reservation. My name is {NAME}.")]
    book = [Turn("user", f"Hi, I'd like to book a flight. My name is {NAME}.")]
    assert seller.understand(change).intent == "cancel" and make_seller("expert").understand(change).intent == "change"
    assert "confirm_cancel" in read_agent(seller.respond(change, seed=0)[0]).asks
    assert seller.understand(cancel).intent == "change"
    assert seller.understand(book).intent == "book"


def test_wrong_name_writes_someone_else_in_the_action():
    history, accepted = _accepted()
    action = read_action(variant("x", wrong_name=1.0).respond(history, seed=0)[0])
    assert action.flight == accepted and action.status == "book"
    assert name_f1(action.name, NAME) == 0.0


def test_ask_twice_repeats_each_question_once():
    seller = variant("x", ask_twice=True)
    history = [Turn("user", "Hi, I'd like to book a flight."), Turn("agent", "May I have your name, please?"),
               Turn("user", f"My name is {NAME}.")]  # fmt: skip
    assert "route" in read_agent(make_seller("expert").respond(history, seed=0)[0]).asks
    again = seller.respond(history, seed=0)[0]
    assert read_agent(again).asks == {"name"}
    history += [Turn("agent", again), Turn("user", f"It's {NAME}.")]
    assert "route" in read_agent(seller.respond(history, seed=0)[0]).asks


def test_late_give_up_only_from_the_fifth_turn():
    seller = variant("x", late_give_up=1.0)
    history = _booking_until_proposal() + [Turn("user", "No, I want business class.")]  # three agent turns
    assert not read_agent(seller.respond(history, seed=0)[0]).goodbye
    history += [Turn("agent", "Any constraints?"), Turn("user", "No particular preferences.")]
    late = seller.respond(history, seed=0)[0]  # the fifth agent turn
    assert read_agent(late).goodbye and read_action(late) is None
    assert not read_agent(make_seller("expert").respond(history, seed=0)[0]).goodbye


def test_drop_prefs_ignores_what_the_customer_asks_for():
    history = [Turn("user", "Hi, I'd like to book a flight."), Turn("agent", "Any constraints?"),
               Turn("user", "Business class and my budget is $500.")]  # fmt: skip
    assert make_seller("expert").understand(history).prefs == {"cabin": "business", "max_price": 500}
    heard = variant("x", drop_prefs=1.0).understand(history)
    assert heard.prefs == {} and heard.prefs_known


def test_eager_cancel_cancels_a_change():
    history = [Turn("user", f"Hi, I need to change my reservation. My name is {NAME}."),
               Turn("agent", "Where are you flying from and to, and on which dates?"), Turn("user", TRIP),
               Turn("agent", "Do you have any preferences?"), Turn("user", "No particular preferences.")]  # fmt: skip
    assert read_agent(make_seller("expert").respond(history, seed=0)[0]).proposal is not None
    action = read_action(variant("x", eager_cancel=1.0).respond(history, seed=0)[0])
    assert action.status == "cancel" and action.flight is None


def test_mumble_hides_questions_but_not_proposals():
    for text in RAMBLES:
        facts = read_agent(text)
        assert not facts.asks and not facts.goodbye and facts.proposal is None and read_action(text) is None
    seller = variant("x", mumble=1.0)
    assert seller.respond([Turn("user", "Hi, I'd like to book a flight.")], seed=0)[0] in RAMBLES
    history = _booking_until_proposal()[:-1]
    assert read_agent(seller.respond(history, seed=0)[0]).proposal is not None


def test_confirm_twice_books_after_the_second_yes():
    seller = variant("x", confirm_twice=True)
    once, flight = _accepted(1)
    assert read_agent(seller.respond(once, seed=0)[0]).proposal == flight
    twice, _ = _accepted(2)
    assert read_action(seller.respond(twice, seed=0)[0]).flight == flight


def test_priciest_proposes_the_dearest_flight():
    history = _booking_until_proposal()[:-1]
    cheap = W.flight_by_number(read_agent(make_seller("expert").respond(history, seed=0)[0]).proposal)
    dear = W.flight_by_number(read_agent(variant("x", choice="priciest").respond(history, seed=0)[0]).proposal)
    same = [f for f in W.timetable("BOS", "DEN", 3) if (f.dep_day, f.ret_day) == (cheap.dep_day, cheap.ret_day)]
    assert dear.price == max(f.price for f in same) > cheap.price


def test_reward_mix_is_the_presets(tmp_path):
    weights = REWARD_WEIGHTS["airline-heldout"]
    assert weights != AIRDIALOGUE_WEIGHTS and abs(sum(weights.values()) - 1) < 1e-12
    assert REWARD_WEIGHTS["airline24"] == REWARD_WEIGHTS["rule6"] == {"name": 0.2, "flight": 0.5, "status": 0.3}
    agents = ["name_scrambler", "muddle"]
    for preset, w in (("airline-heldout", weights), ("airline24", AIRDIALOGUE_WEIGHTS)):
        cfg = SimulateConfig(preset=preset, seed=2, dialogues_per_agent=20, truth_rollouts=40, max_stderr=1.0)
        generate(cfg, tmp_path / preset, agents=agents)
        manifest = json.loads((tmp_path / preset / "manifest.json").read_text())
        assert manifest.get("reward_weights") == (weights if preset == "airline-heldout" else None)
        for d in ExperienceStore.open(tmp_path / preset).dialogues.to_pylist():
            mix = w["name"] * d["rating_name"] + w["flight"] * d["rating_flight"] + w["status"] * d["rating_status"]
            assert d["rating_reward"] == pytest.approx(mix, abs=1e-12)
        truth = {(r["agent_id"], r["rating"]): r["value"] for r in pq.read_table(tmp_path / preset / TRUTH_FILE).to_pylist()}
        for a in agents:
            mix = sum(w[k] * truth[(a, k)] for k in w)
            assert truth[(a, "reward")] == pytest.approx(mix, abs=1e-9)


def test_heldout_sellers_act_on_states_from_other_dialogues():
    logged = [rollout(make_seller(a), seed) for a in ("muddle", "echo", "worst") for seed in range(3)]
    for a in HELDOUT:
        agent = make_seller(a)
        for ro in logged:
            for i, t in enumerate(ro.turns):
                if t.role == "agent":
                    reply = agent.respond(list(ro.turns[:i]), seed=5)
                    assert reply[0].strip() and reply == agent.respond(list(ro.turns[:i]), seed=5)
