"""Customer goals and the outcome each goal calls for.

A goal is what the simulated customer wants (book, change or cancel), who they are and the
constraints of the trip. ``expected_outcome`` applies AirDialogue's rules to it: the correct
final status (book / change / cancel / no_flight / no_reservation) and the correct flights
(the cheapest flights on the asked dates that meet every constraint; none for the
"no flight", "no reservation" and cancel cases).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from enigma.sim import world as W

INTENTS = ("book", "change", "cancel")
STATUSES = ("book", "change", "cancel", "no_flight", "no_reservation")


@dataclass(frozen=True)
class Goal:
    intent: str
    name: str
    origin: str
    destination: str
    month: int
    dep_day: int
    ret_day: int
    dep_window: str | None = None  # "morning" | "afternoon" | "evening"
    ret_window: str | None = None
    cabin: str | None = None  # "economy" | "business"
    max_price: int | None = None
    max_connections: int | None = None
    normal_airline_only: bool = False

    def __post_init__(self) -> None:
        if self.intent not in INTENTS:
            raise ValueError(f"goal intent {self.intent!r} not one of {INTENTS}")
        for f in ("dep_window", "ret_window"):
            v = getattr(self, f)
            if v is not None and v not in W.TIME_WINDOWS:
                raise ValueError(f"goal {f} {v!r} not one of {tuple(W.TIME_WINDOWS)}")

    @property
    def constraints(self) -> dict:
        keys = ("dep_window", "ret_window", "cabin", "max_price", "max_connections")
        out = {k: getattr(self, k) for k in keys if getattr(self, k) is not None}
        if self.normal_airline_only:
            out["normal_airline_only"] = True
        return out

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Outcome:
    status: str
    flights: tuple[int, ...]  # correct flight numbers; empty when no flight should be booked
    name: str


def satisfies(goal: Goal, f: W.Flight) -> bool:
    """Whether a flight meets every constraint of the goal, route and exact dates included."""
    if (f.origin, f.destination, f.dep_month, f.dep_day, f.ret_day) != (
        goal.origin, goal.destination, goal.month, goal.dep_day, goal.ret_day,
    ):  # fmt: skip
        return False
    return meets_preferences(goal.constraints, f)


def meets_preferences(prefs: dict, f: W.Flight) -> bool:
    """Whether a flight meets the preference constraints in ``prefs`` (keys as Goal.constraints)."""
    if (w := prefs.get("dep_window")) and W.time_window_of(f.dep_hour) != w:
        return False
    if (w := prefs.get("ret_window")) and W.time_window_of(f.ret_hour) != w:
        return False
    if (c := prefs.get("cabin")) and f.cabin != c:
        return False
    if prefs.get("max_price") is not None and f.price > prefs["max_price"]:
        return False
    if prefs.get("max_connections") is not None and f.connections > prefs["max_connections"]:
        return False
    if prefs.get("normal_airline_only") and f.low_cost:
        return False
    return True


def knowledge_base(goal: Goal) -> tuple[W.Flight, ...]:
    """The flights the customer's trip could be booked on: its route's table for its month."""
    return W.timetable(goal.origin, goal.destination, goal.month)


def expected_outcome(goal: Goal) -> Outcome:
    if goal.intent in ("change", "cancel") and W.reservation_for(goal.name) is None:
        return Outcome("no_reservation", (), goal.name)
    if goal.intent == "cancel":
        return Outcome("cancel", (), goal.name)
    ok = [f for f in knowledge_base(goal) if satisfies(goal, f)]
    if not ok:
        return Outcome("no_flight", (), goal.name)
    best = min(f.price for f in ok)
    return Outcome(goal.intent, tuple(f.number for f in ok if f.price == best), goal.name)


def _draw_name(r: random.Random, want_reservation: bool | None) -> str:
    for _ in range(200):
        name = f"{r.choice(W.FIRST_NAMES)} {r.choice(W.LAST_NAMES)}"
        if want_reservation is None or (W.reservation_for(name) is not None) == want_reservation:
            return name
    raise RuntimeError("no name with the wanted reservation status in 200 draws")  # pragma: no cover


def sample_goal(r: random.Random) -> Goal:
    """A customer goal. Constraints are usually drawn around one flight on the asked dates
    (so that most trips are bookable) and sometimes independently (so that some are not)."""
    intent = r.choices(INTENTS, weights=(0.5, 0.25, 0.25))[0]
    want_res = None if intent == "book" else r.random() < 0.8
    name = _draw_name(r, want_res)
    origin, destination = r.sample(W.CODES, 2)
    month = r.randint(1, 12)
    table = W.timetable(origin, destination, month)
    anchor = r.choice(table)
    same_dates = [f for f in table if (f.dep_day, f.ret_day) == (anchor.dep_day, anchor.ret_day)]
    if r.random() < 0.85:
        target = r.choice(same_dates)
        dep_window = W.time_window_of(target.dep_hour) if r.random() < 0.4 else None
        ret_window = W.time_window_of(target.ret_hour) if r.random() < 0.3 else None
        cabin = target.cabin if r.random() < 0.5 else None
        max_price = min(b for b in W.BUDGETS if b >= target.price) if r.random() < 0.6 else None
        max_conn = max(target.connections, r.choice((0, 1))) if r.random() < 0.4 else None
        normal_only = (not target.low_cost) and r.random() < 0.2
    else:
        dep_window = r.choice(tuple(W.TIME_WINDOWS)) if r.random() < 0.5 else None
        ret_window = r.choice(tuple(W.TIME_WINDOWS)) if r.random() < 0.4 else None
        cabin = r.choice(("economy", "business")) if r.random() < 0.5 else None
        max_price = r.choice(W.BUDGETS[:3]) if r.random() < 0.7 else None
        max_conn = r.choice((0, 1)) if r.random() < 0.5 else None
        normal_only = r.random() < 0.2
    return Goal(
        intent=intent,
        name=name,
        origin=origin,
        destination=destination,
        month=month,
        dep_day=anchor.dep_day,
        ret_day=anchor.ret_day,
        dep_window=dep_window,
        ret_window=ret_window,
        cabin=cabin,
        max_price=max_price,
        max_connections=max_conn,
        normal_airline_only=normal_only,
    )
