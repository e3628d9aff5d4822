"""AirDialogue's task scores (see ``data/raw/airdialogue_ope_stats/SOURCE.md``).

- name: token F1 between the name in the agent's final action and the customer's name;
- flight: 1 minus the normalised attribute distance to a correct flight, with the special
  cases: when no flight should be booked (no flight, no reservation, cancel), 1 if the agent
  booked none, else 0; when one should be booked, 0 for no flight or a flight outside the
  customer's knowledge base, 1 for a correct flight;
- status: 1 if the final status equals the expected one;
- reward = 0.2 name + 0.5 flight + 0.3 status (AirDialogue's mix; a preset may weigh them
  otherwise: ``seller_presets.REWARD_WEIGHTS``).
All four are in [0, 1] and are the simulator's ratings.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from enigma.sim import world as W
from enigma.sim.goals import Goal, Outcome, expected_outcome, knowledge_base

RATINGS = ("reward", "name", "flight", "status")
AIRDIALOGUE_WEIGHTS = {"name": 0.2, "flight": 0.5, "status": 0.3}
ACTION_STATUSES = ("book", "change", "cancel", "no_flight", "no_reservation", "none")

# Numeric attributes and the fixed range each difference is divided by; price has none and is
# divided by the smaller of the two prices, as in AirDialogue's flight distance.
_NUMERIC_RANGES = {
    "dep_month": 12, "ret_month": 12, "dep_day": 31, "ret_day": 31,
    "dep_hour": 24, "ret_hour": 24, "connections": 2, "price": None,
}  # fmt: skip
_CATEGORICAL = ("origin", "destination", "cabin")
N_ATTRIBUTES = len(_NUMERIC_RANGES) + len(_CATEGORICAL) + 1  # + airline (by cost class): 12


@dataclass(frozen=True)
class Action:
    """The agent's final action: a status, the flight it booked (if any) and the name used.
    ``status="none"`` means the dialogue ended without an action."""

    status: str
    flight: int | None
    name: str

    def __post_init__(self) -> None:
        if self.status not in ACTION_STATUSES:
            raise ValueError(f"action status {self.status!r} not one of {ACTION_STATUSES}")


NO_ACTION = Action("none", None, "")


def name_f1(predicted: str, truth: str) -> float:
    p, t = W.normalise_name(predicted).split(), W.normalise_name(truth).split()
    if not p or not t:
        return float(p == t)
    common = sum((Counter(p) & Counter(t)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(t)
    return 2 * precision * recall / (precision + recall)


def flight_distance(a: W.Flight, b: W.Flight) -> float:
    """Mean per-attribute mismatch over the 12 attributes, each in [0, 1]."""
    total = sum(getattr(a, k) != getattr(b, k) for k in _CATEGORICAL)
    total += a.low_cost != b.low_cost  # airlines compare by normal vs low-cost class only
    for k, span in _NUMERIC_RANGES.items():
        x, y = getattr(a, k), getattr(b, k)
        denom = span if span is not None else min(x, y)
        total += min(1.0, abs(x - y) / denom) if denom > 0 else float(x != y)
    return total / N_ATTRIBUTES


def flight_score(booked: int | None, correct: tuple[int, ...], kb: tuple[W.Flight, ...]) -> float:
    if not correct:
        return 1.0 if booked is None else 0.0
    if booked is None:
        return 0.0
    if booked in correct:
        return 1.0
    by_number = {f.number: f for f in kb}
    if booked not in by_number:
        return 0.0
    targets = [by_number[c] for c in correct]

    def dist(f: W.Flight) -> float:
        return min(flight_distance(f, t) for t in targets)

    worst = max(dist(f) for f in kb)
    if worst <= 0:
        return 1.0
    return 1.0 - min(1.0, dist(by_number[booked]) / worst)


def score(goal: Goal, action: Action, outcome: Outcome | None = None,
          weights: dict[str, float] = AIRDIALOGUE_WEIGHTS) -> dict[str, float]:  # fmt: skip
    """The four ratings of a finished dialogue; ``weights`` mix name, flight and status into the reward."""
    outcome = outcome or expected_outcome(goal)
    name = name_f1(action.name, outcome.name)
    flight = flight_score(action.flight, outcome.flights, knowledge_base(goal))
    status = float(action.status == outcome.status)
    reward = weights["name"] * name + weights["flight"] * flight + weights["status"] * status
    return {"reward": reward, "name": name, "flight": flight, "status": status}
