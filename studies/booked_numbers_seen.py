"""Issue 71: can the airline logs teach which flight a booking should have named? For each store,
how many distinct flight numbers the sellers name, and in how many dialogues each appears. A
number seen in one dialogue only carries no evidence, in any other dialogue, of the route, dates
or preferences it fits: whether a direct booker's booking was right is then not in the text.

    .venv/bin/python studies/booked_numbers_seen.py airline airline-seed1
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

import pandas as pd

from result_files import write_result

REPO = Path(__file__).resolve().parents[1]
FLIGHT = re.compile(r"flight (\d{5,})")  # the simulator's sellers name a flight as "flight <number>"


def numbers_seen(turns: pd.DataFrame) -> pd.Series:
    """For every flight number the agents name: the number of dialogues it appears in."""
    seen: dict[str, set[str]] = collections.defaultdict(set)
    for dialog_id, text in turns.loc[turns.role == "agent", ["dialog_id", "text"]].itertuples(index=False):
        for number in FLIGHT.findall(text):
            seen[number].add(dialog_id)
    return pd.Series({k: len(v) for k, v in seen.items()}, dtype=int)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("benchmarks", nargs="+")
    args = ap.parse_args(argv)
    lines = ["# Flight numbers the airline sellers name, and in how many dialogues", "",
             f"`.venv/bin/python studies/booked_numbers_seen.py {' '.join(args.benchmarks)}`", "",
             "| store | dialogues | distinct numbers | in one dialogue only | most dialogues for one number |",
             "|---|---|---|---|---|"]
    payload = {}
    for b in args.benchmarks:
        turns = pd.read_parquet(REPO / "data" / b / "store" / "turns.parquet")
        n = numbers_seen(turns)
        payload[b] = {"dialogues": turns.dialog_id.nunique(), "numbers": len(n), "in_one_dialogue": float((n == 1).mean()),
                      "most_dialogues": int(n.max())}
        lines.append(f"| {b} | {payload[b]['dialogues']} | {len(n)} | {(n == 1).mean():.1%} | {n.max()} |")
    write_result("booked_numbers_seen", lines, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
