"""The airline world: airports, airlines, names, a fixed timetable and the reservation book.

Everything here is a pure function of its arguments and the constant ``WORLD_SEED``, never of
a dialogue's seed. That is what lets an agent act at a state taken from someone else's
dialogue: what it needs beyond the text (the flights for the route it heard, whether a name
holds a reservation) it can look up here, and an agent that mishears a city looks up the
wrong flights, exactly as a human agent with a misheard query would.

The timetable is organised by (origin, destination, departure month): 10 date pairs with 4
flights each. Flight numbers encode that position, so a number identifies one flight in the
whole world and ``flight_by_number`` needs no search.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from enigma.sim.rng import rng

WORLD_SEED = 20210401

AIRPORTS: dict[str, str] = {
    "ATL": "Atlanta",
    "BOS": "Boston",
    "ORD": "Chicago",
    "DFW": "Dallas",
    "DEN": "Denver",
    "DTW": "Detroit",
    "IAH": "Houston",
    "LAS": "Las Vegas",
    "LAX": "Los Angeles",
    "MIA": "Miami",
    "MSP": "Minneapolis",
    "JFK": "New York",
    "PHL": "Philadelphia",
    "PHX": "Phoenix",
    "SFO": "San Francisco",
    "SEA": "Seattle",
}
CODES: tuple[str, ...] = tuple(AIRPORTS)
CITY_TO_CODE: dict[str, str] = {city.lower(): code for code, city in AIRPORTS.items()}

NORMAL_AIRLINES = ("Delta", "United", "American", "Alaska", "Hawaiian")
LOW_COST_AIRLINES = ("Southwest", "JetBlue", "Spirit", "Frontier")
AIRLINES = NORMAL_AIRLINES + LOW_COST_AIRLINES

MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
MONTH_INDEX = {m.lower(): i + 1 for i, m in enumerate(MONTHS)}
MONTH_INDEX.update({m[:3].lower(): i + 1 for i, m in enumerate(MONTHS)})

FIRST_NAMES = (
    "Emily", "James", "Olivia", "Daniel", "Sophia", "Michael", "Ava", "David", "Isabella",
    "Joseph", "Mia", "Anthony", "Charlotte", "Andrew", "Amelia", "Joshua", "Harper", "Ryan",
    "Evelyn", "Brandon", "Abigail", "Kevin", "Grace", "Jason", "Chloe", "Justin", "Lily",
    "Aaron", "Hannah", "Kyle", "Nora", "Eric", "Zoe", "Sean", "Stella", "Patrick", "Leah",
    "Gregory", "Ruth", "Samuel",
)  # fmt: skip
LAST_NAMES = (
    "Clark", "Lewis", "Walker", "Hall", "Young", "Allen", "King", "Wright", "Scott", "Green",
    "Baker", "Adams", "Nelson", "Carter", "Mitchell", "Roberts", "Turner", "Phillips",
    "Campbell", "Parker", "Evans", "Edwards", "Collins", "Stewart", "Morris", "Rogers", "Reed",
    "Cook", "Morgan", "Bell", "Murphy", "Bailey", "Cooper", "Richardson", "Cox", "Howard",
    "Ward", "Torres", "Peterson", "Gray",
)  # fmt: skip
FIRST_NAME_SET = {n.lower() for n in FIRST_NAMES}
LAST_NAME_SET = {n.lower() for n in LAST_NAMES}

N_DATE_PAIRS = 10
FLIGHTS_PER_DATE = 4
TABLE_SIZE = N_DATE_PAIRS * FLIGHTS_PER_DATE
_FIRST_NUMBER = 100000

# Price levels a customer states as a budget, and time-of-day windows (inclusive hours).
BUDGETS = (200, 500, 1000, 5000)
TIME_WINDOWS: dict[str, tuple[int, int]] = {"morning": (5, 11), "afternoon": (12, 17), "evening": (18, 23)}
RESERVATION_RATE = 0.55


@dataclass(frozen=True)
class Flight:
    number: int
    origin: str
    destination: str
    dep_month: int
    dep_day: int
    ret_month: int
    ret_day: int
    dep_hour: int
    ret_hour: int
    cabin: str  # "economy" | "business"
    price: int
    connections: int
    airline: str

    @property
    def low_cost(self) -> bool:
        return self.airline in LOW_COST_AIRLINES


def _route_index(origin: str, destination: str) -> int:
    o, d = CODES.index(origin), CODES.index(destination)
    return o * len(CODES) + d


def _base_fare(origin: str, destination: str) -> int:
    # A per-route fare level standing in for distance; symmetric so a route and its reverse cost alike.
    a, b = sorted((origin, destination))
    return 110 + rng(WORLD_SEED, "fare", a, b).randrange(0, 300)


@lru_cache(maxsize=4096)
def timetable(origin: str, destination: str, month: int) -> tuple[Flight, ...]:
    """All flights of a route departing in ``month`` (1-12), in flight-number order."""
    if origin not in AIRPORTS or destination not in AIRPORTS or origin == destination:
        raise ValueError(f"no route {origin!r} -> {destination!r}")
    if not 1 <= month <= 12:
        raise ValueError(f"month {month} not in 1..12")
    r = rng(WORLD_SEED, "table", origin, destination, month)
    base = _base_fare(origin, destination)
    first = _FIRST_NUMBER + (_route_index(origin, destination) * 12 + month - 1) * TABLE_SIZE
    dep_days = sorted(r.sample(range(1, 25), N_DATE_PAIRS))
    flights = []
    for p, dep_day in enumerate(dep_days):
        ret_day = dep_day + r.randint(2, 6)
        for k in range(FLIGHTS_PER_DATE):
            airline = r.choice(AIRLINES)
            cabin = "business" if r.random() < 0.3 else "economy"
            connections = r.choices((0, 1, 2), weights=(0.45, 0.4, 0.15))[0]
            price = base * (2.6 if cabin == "business" else 1.0) * (1 - 0.15 * connections)
            price *= (0.75 if airline in LOW_COST_AIRLINES else 1.0) * r.uniform(0.8, 1.25)
            flights.append(
                Flight(
                    number=first + p * FLIGHTS_PER_DATE + k,
                    origin=origin,
                    destination=destination,
                    dep_month=month,
                    dep_day=dep_day,
                    ret_month=month,
                    ret_day=ret_day,
                    dep_hour=r.randint(5, 23),
                    ret_hour=r.randint(5, 23),
                    cabin=cabin,
                    price=int(round(price / 10.0)) * 10,
                    connections=connections,
                    airline=airline,
                )
            )
    return tuple(flights)


def flight_by_number(number: int) -> Flight | None:
    """The flight with this number anywhere in the world, or None if there is none."""
    offset = number - _FIRST_NUMBER
    if offset < 0:
        return None
    table_index, k = divmod(offset, TABLE_SIZE)
    route, month0 = divmod(table_index, 12)
    o, d = divmod(route, len(CODES))
    if o >= len(CODES) or o == d:
        return None
    return timetable(CODES[o], CODES[d], month0 + 1)[k]


def search_flights(
    origin: str, destination: str, dep_month: int, dep_day: int, ret_day: int, window: int = 2
) -> list[Flight]:
    """What a booking system returns for a query: the route's flights of that month whose
    dates are within ``window`` days of the asked ones (exact matches first, then by number)."""
    if origin not in AIRPORTS or destination not in AIRPORTS or origin == destination:
        return []
    if not 1 <= dep_month <= 12:
        return []
    hits = [
        f
        for f in timetable(origin, destination, dep_month)
        if abs(f.dep_day - dep_day) <= window and abs(f.ret_day - ret_day) <= window
    ]
    hits.sort(key=lambda f: (f.dep_day != dep_day or f.ret_day != ret_day, f.number))
    return hits


def normalise_name(name: str) -> str:
    return " ".join("".join(c for c in tok if c.isalnum()) for tok in name.lower().split()).strip()


def reservation_for(name: str) -> Flight | None:
    """The reservation held under ``name`` (any spelling of case/punctuation), or None."""
    key = normalise_name(name)
    if not key:
        return None
    r = rng(WORLD_SEED, "reservation", key)
    if r.random() >= RESERVATION_RATE:
        return None
    o, d = r.sample(CODES, 2)
    return timetable(o, d, r.randint(1, 12))[r.randrange(TABLE_SIZE)]


def time_window_of(hour: int) -> str:
    for name, (lo, hi) in TIME_WINDOWS.items():
        if lo <= hour <= hi:
            return name
    return "night"
