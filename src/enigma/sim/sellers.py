"""Seller agents: rule-based airline agents of graded quality, each an ``Agent``.

A seller rebuilds everything it knows from the history text at every call: the customer's
intent, name, route, dates and preferences (``language.read_customer``), and what was
already asked, proposed, accepted or refused (``language.read_agent`` on earlier agent turns,
whoever wrote them). World knowledge comes only from ``enigma.sim.world`` queried with what
it heard. So a seller acts sensibly at any state of any dialogue, including dialogues
produced by other agents, which is what target-action sampling needs.

Quality is set by ``SellerKnobs`` (``seller_presets``, with every preset's table of them), the
wording by the seller's style (``seller_words``). Two kinds of randomness, both deterministic:
- hearing (mishearing a slot, misreading the intent) is a function of the agent, the
  utterance and the slot, so one agent hears one utterance the same way at every later turn;
- acting (wording, redundant questions, giving up, slips of the final status) draws from the
  ``seed`` of the call, so different seeds give different replies where the policy is random.

Agents are exposed as factories for the spec ``python:enigma.sim.sellers:<agent_id>`` through
a module-level ``__getattr__``; ``seller_presets.preset_agents(name)`` lists a preset's agent ids.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

from enigma.dialogue import History
from enigma.sim import world as W
from enigma.sim.config import MAX_AGENT_TURNS
from enigma.sim.goals import INTENTS, meets_preferences
from enigma.sim.language import CLOSING_THANKS, AgentFacts, fmt_action, fmt_date, fmt_hour, read_action, read_agent, read_customer
from enigma.sim.rng import rng
from enigma.sim.seller_presets import SELLERS, SellerKnobs
from enigma.sim.seller_words import RAMBLES, STYLES

_ASK_ORDER = ("intent", "name", "route", "dates", "prefs")


def dialogue_over(history: History) -> bool:
    """Whether an agent turn of ``history`` already ended the dialogue: a final action, or a
    goodbye (``language.read_action``, ``read_agent``): what the simulator's rollout stops on."""
    for turn in history:
        if turn.role == "agent" and (read_action(turn.text) is not None or read_agent(turn.text).goodbye):
            return True
    return False


def _stops(n: int) -> str:
    return ("nonstop", "1 stop", "2 stops")[n]


@dataclass
class Belief:
    """What a seller has understood from the history so far."""

    intent: str | None = None
    name: str | None = None
    origin: str | None = None
    destination: str | None = None
    month: int | None = None
    dep_day: int | None = None
    ret_day: int | None = None
    prefs: dict = field(default_factory=dict)
    prefs_known: bool = False
    asked: set = field(default_factory=set)
    rejected: set = field(default_factory=set)
    accepted: int | None = None
    cancel_asked: bool = False
    agent_turns: int = 0
    ask_counts: dict = field(default_factory=dict)  # ask -> agent turns that asked it
    last_asks: frozenset = frozenset()  # what the latest agent turn asked
    accepts: dict = field(default_factory=dict)  # proposed flight -> times the customer accepted it

    def route_known(self) -> bool:
        return self.origin is not None and self.destination is not None and self.origin != self.destination

    def dates_known(self) -> bool:
        return None not in (self.month, self.dep_day, self.ret_day)


class SellerAgent:
    """A rule-based airline agent. See the module docstring for how it reads the history."""

    def __init__(self, agent_id: str, knobs: SellerKnobs) -> None:
        if knobs.style not in STYLES:
            raise ValueError(f"{agent_id}: unknown style {knobs.style!r}; one of {sorted(STYLES)}")
        if knobs.choice not in ("best", "first", "random", "priciest"):
            raise ValueError(f"{agent_id}: unknown choice rule {knobs.choice!r}")
        if knobs.name_mode not in ("full", "first", "last"):
            raise ValueError(f"{agent_id}: unknown name mode {knobs.name_mode!r}")
        self.agent_id = agent_id
        self.knobs = knobs
        self._words = STYLES[knobs.style]

    def __repr__(self) -> str:
        return f"SellerAgent({self.agent_id!r})"

    def fingerprint_parts(self) -> dict[str, Any]:
        """What decides the replies beyond this module's source, which the ``python:`` agent kind
        fingerprints: the knobs and the style's wording (``seller_presets``, ``seller_words``), so
        that a change to either changes the agent's fingerprint and its cached samples are not reused."""
        return {"knobs": asdict(self.knobs), "wording": self._words}

    # ---- the Agent protocol ------------------------------------------------------------------
    def respond(self, history: History, n: int = 1, seed: int | None = None) -> list[str]:
        base = 0 if seed is None else seed
        if history and history[-1].role == "user" and history[-1].text in CLOSING_THANKS and dialogue_over(history):
            # the customer thanks it after the outcome (``simulate.closing_exchanges``): small talk
            # that decides nothing. Anything else said after the end is answered as before (a
            # learned customer may go on talking), so the stores made before closings stay as they were
            return [self._say("closing", rng(base, "closing", i)) for i in range(n)]
        belief = self.understand(history)
        return [self._act(belief, rng(base, "act", i)) for i in range(n)]

    # ---- hearing -----------------------------------------------------------------------------
    def _hears_wrong(self, p: float, slot: str, text: str) -> random.Random | None:
        if p <= 0:
            return None
        r = rng(self.agent_id, slot, text)
        return r if r.random() < p else None

    def understand(self, history: History) -> Belief:
        b = Belief()
        k = self.knobs
        last: AgentFacts | None = None
        for turn in history:
            if turn.role == "agent":
                last = read_agent(turn.text)
                b.agent_turns += 1
                b.asked |= last.asks
                b.last_asks = last.asks
                for a in last.asks:
                    b.ask_counts[a] = b.ask_counts.get(a, 0) + 1
                if "confirm_cancel" in last.asks:
                    b.cancel_asked = True
                continue
            text = turn.text
            facts = read_customer(text)
            if facts.intent is not None:
                intent = facts.intent
                if k.intent_noise > 0 and rng(self.agent_id, "intent", text).random() < k.intent_noise:
                    intent = rng(self.agent_id, "intent-value", text).choice(INTENTS)
                if intent in ("change", "cancel") and self._hears_wrong(k.swap_change_cancel, "change-cancel", text) is not None:
                    intent = "cancel" if intent == "change" else "change"
                b.intent = intent
            if facts.name is not None:
                name = facts.name
                if (r := self._hears_wrong(k.mishear_name, "name", text)) is not None:
                    name = f"{name.split()[0]} {r.choice([x for x in W.LAST_NAMES if x != name.split()[1]])}"
                b.name = name
            for slot in ("origin", "destination"):
                code = getattr(facts, slot)
                if code is not None:
                    if (r := self._hears_wrong(k.mishear_city, slot, text)) is not None:
                        code = r.choice([c for c in W.CODES if c != code])
                    setattr(b, slot, code)
            for slot, attr in (("dep", "dep_day"), ("ret", "ret_day")):
                date = getattr(facts, slot)
                if date is not None:
                    month, day = date
                    if (r := self._hears_wrong(k.mishear_date, slot, text)) is not None:
                        day = min(28, max(1, day + r.choice((-2, -1, 1, 2))))
                    if month is not None:
                        b.month = month
                    setattr(b, attr, day)
            if facts.prefs:
                heard = dict(facts.prefs)
                if k.drop_prefs > 0:
                    heard = {key: v for key, v in heard.items() if self._hears_wrong(k.drop_prefs, "pref-" + key, text) is None}
                b.prefs.update(heard)
                b.prefs_known = True
            if facts.no_prefs:
                b.prefs_known = True
            if last is not None and last.proposal is not None:
                if facts.accept and not facts.reject:
                    b.accepted = last.proposal
                    b.accepts[last.proposal] = b.accepts.get(last.proposal, 0) + 1
                else:
                    b.rejected.add(last.proposal)
            last = None
        return b

    # ---- acting ------------------------------------------------------------------------------
    def _say(self, key: str, r: random.Random, **fields) -> str:
        return r.choice(self._words[key]).format(**fields)

    def _final(self, status: str, flight: W.Flight | None, b: Belief, r: random.Random) -> str:
        k = self.knobs
        name = b.name or ""
        if k.name_mode != "full" and name:
            name = name.split()[0 if k.name_mode == "first" else -1]
        if status in ("book", "change", "cancel") and k.status_slip > 0 and r.random() < k.status_slip:
            status = r.choice([s for s in ("book", "change", "cancel") if s != status])
            if status == "cancel":
                flight = None
        if status in ("book", "change", "cancel") and k.wrong_name > 0 and r.random() < k.wrong_name:
            first, _, last = (b.name or " ").partition(" ")
            name = f"{r.choice([n for n in W.FIRST_NAMES if n != first])} {r.choice([n for n in W.LAST_NAMES if n != last])}"
        number = flight.number if flight is not None else None
        text = self._say(status, r, num=number, name=name or "you")
        return f"{text} {fmt_action(status, number, name)}"

    def _propose(self, f: W.Flight, r: random.Random) -> str:
        form = r.randrange(4)
        return self._say(
            "propose", r, num=f.number, airline=f.airline,
            dep=fmt_date(f.dep_month, f.dep_day, form), ret=fmt_date(f.ret_month, f.ret_day, form),
            dh=fmt_hour(f.dep_hour, form), rh=fmt_hour(f.ret_hour, form),
            cabin=f.cabin, stops=_stops(f.connections), price=f.price,
        )  # fmt: skip

    def _candidates(self, b: Belief) -> list[W.Flight]:
        k = self.knobs
        if not (b.route_known() and b.dates_known()):
            return []
        found = W.search_flights(b.origin, b.destination, b.month, b.dep_day, b.ret_day)
        found = [f for f in found if f.number not in b.rejected]
        if k.choice != "random":
            found = [f for f in found if meets_preferences(b.prefs, f)]
        exact = [f for f in found if (f.dep_day, f.ret_day) == (b.dep_day, b.ret_day)]
        if k.exact_dates:
            # No flight at all on the asked dates suggests the dates were misheard: offer the
            # nearest ones and let the customer correct them.
            any_exact = any(
                (f.dep_day, f.ret_day) == (b.dep_day, b.ret_day)
                for f in W.search_flights(b.origin, b.destination, b.month, b.dep_day, b.ret_day, window=0)
            )
            if exact or any_exact:
                found = exact
        return found

    def _pick(self, cands: list[W.Flight], b: Belief, r: random.Random) -> W.Flight:
        k = self.knobs
        if k.choice == "random":
            return r.choice(cands)
        if k.choice == "first":
            return cands[0]
        if k.choice == "priciest":
            return max(cands, key=lambda f: (f.price, f.number))
        if not k.exact_dates:
            return min(cands, key=lambda f: (f.price, f.number))
        off = lambda f: abs(f.dep_day - (b.dep_day or 0)) + abs(f.ret_day - (b.ret_day or 0))  # noqa: E731
        return min(cands, key=lambda f: (off(f), f.price, f.connections, f.number))

    def _switched(self, f: W.Flight, r: random.Random) -> W.Flight:
        same_dates = [g for g in W.timetable(f.origin, f.destination, f.dep_month)
                      if (g.dep_day, g.ret_day) == (f.dep_day, f.ret_day) and g.number != f.number]  # fmt: skip
        return r.choice(same_dates) if same_dates else f

    def _act(self, b: Belief, r: random.Random) -> str:
        reply = self._decide(b, r)
        k = self.knobs
        if k.mumble > 0:
            facts = read_agent(reply)
            if facts.asks and r.random() < k.mumble:
                return r.choice(RAMBLES)
        return reply

    def _decide(self, b: Belief, r: random.Random) -> str:
        k = self.knobs
        last_turn = b.agent_turns >= MAX_AGENT_TURNS - 1
        status_for = {"change": "change"}.get(b.intent or "book", "book")
        if b.accepted is not None and b.intent != "cancel":
            flight = W.flight_by_number(b.accepted)
            if k.confirm_twice and flight is not None and b.accepts.get(b.accepted, 0) < 2 and not last_turn:
                return self._propose(flight, r)
            if k.switch_flight > 0 and flight is not None and r.random() < k.switch_flight:
                flight = self._switched(flight, r)
            return self._final(status_for, flight, b, r)
        if b.agent_turns >= 2 and k.give_up > 0 and r.random() < k.give_up:
            return self._say("give_up", r)
        if b.agent_turns >= 4 and k.late_give_up > 0 and r.random() < k.late_give_up:
            return self._say("give_up", r)
        if (k.eager_cancel > 0 and b.intent != "cancel" and (b.intent == "change" or b.rejected)
                and b.agent_turns >= 2 and r.random() < k.eager_cancel):  # fmt: skip
            return self._final("cancel", None, b, r)
        if k.ask_twice and not last_turn:
            again = [a for a in _ASK_ORDER if a in b.last_asks and b.ask_counts.get(a, 0) < 2]
            if "route" in again and "dates" in again:
                return self._say("route_dates", r)
            if again:
                return self._say(again[0], r)
        if not last_turn and k.redundant > 0 and b.agent_turns >= 1 and r.random() < k.redundant:
            known = [s for s, ok in (("name", b.name), ("route", b.route_known()), ("dates", b.dates_known())) if ok]
            if known:
                return self._say(r.choice(known), r)
            return self._say("filler", r)
        intent = b.intent
        if intent is None:
            if not last_turn:
                return self._say("intent", r)
            intent = "book"  # out of turns: the most common request is the best guess
        if b.name is None and not last_turn:
            return self._say("name", r)
        if intent in ("change", "cancel"):
            reservation = W.reservation_for(b.name or "")
            if reservation is None and k.check_reservation:
                return self._final("no_reservation", None, b, r)
            if intent == "cancel":
                # Asked once: the answer either restates another intent (read above) or confirms.
                if k.confirm and not b.cancel_asked and not last_turn:
                    num = reservation.number if reservation is not None else "on file"
                    return self._say("confirm_cancel", r, num=num)
                return self._final("cancel", None, b, r)
        if not last_turn:
            if not b.route_known() and not b.dates_known() and k.style != "verbose" and r.random() < 0.3:
                return self._say("route_dates", r)
            if not b.route_known():
                return self._say("route", r)
            if not b.dates_known():
                return self._say("dates", r)
            if k.ask_prefs and not b.prefs_known and "prefs" not in b.asked:
                return self._say("prefs", r)
        cands = self._candidates(b)
        if not cands:
            return self._final("no_flight", None, b, r)
        f = self._pick(cands, b, r)
        if k.confirm and not last_turn:
            return self._propose(f, r)
        return self._final(status_for, f, b, r)


def agent_spec(agent_id: str) -> str:
    return f"python:enigma.sim.sellers:{agent_id}"


def make_seller(agent_id: str) -> SellerAgent:
    if agent_id not in SELLERS:
        raise ValueError(f"unknown seller agent {agent_id!r}; known: {sorted(SELLERS)}")
    return SellerAgent(agent_id, SELLERS[agent_id])


def variant(agent_id: str, **changes) -> SellerAgent:
    """A seller with some knobs changed (for experiments beyond the presets)."""
    return SellerAgent(agent_id, replace(SELLERS.get(agent_id, SellerKnobs()), **changes))


def __getattr__(name: str) -> Callable[[], SellerAgent]:
    # `python:enigma.sim.sellers:<agent_id>` resolves to a no-argument factory.
    if name in SELLERS:
        return lambda: make_seller(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
