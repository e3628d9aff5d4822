"""How the benchmarks' target tables treat repeated states: every logged occurrence of a state
gets its own draw now (issue 13), so a stochastic agent shows more than one reply where it has
more than one.

For each benchmark's sampled target tables (``dvc repro sample_airline sample_see2019``): the
share of agent-turn occurrences that sit in a state shared with other dialogues, how many of
those shared states got more than one distinct reply, and, on See 2019, each bot's distinct
openings at the bot-opened chats against the distinct openings of its own transcripts.

    .venv/bin/python studies/sampling_repeated_states.py   # writes studies/results/sampling_repeated_states.md
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RESULTS = REPO / "studies" / "results"


def shared_states(targets_dir: Path) -> dict[str, float]:
    occurrences = shared = groups = varied = 0
    for f in sorted(targets_dir.glob("*.parquet")):
        by_state: dict[str, list[str]] = defaultdict(list)
        t = pq.read_table(f, columns=["state_hash", "text", "sample_index"])
        for h, text, i in zip(*(t.column(c).to_pylist() for c in ("state_hash", "text", "sample_index"))):
            if i == 0:
                by_state[h].append(text)
        for texts in by_state.values():
            occurrences += len(texts)
            if len(texts) > 1:
                shared += len(texts)
                groups += 1
                varied += len(set(texts)) > 1
    return {"occurrences": occurrences, "in_shared_states": shared, "shared_states": groups, "shared_states_varied": varied}


def main() -> None:
    from enigma.store.experience import ExperienceStore
    from enigma.params import Params

    lines = ["# Repeated states in the target tables (studies/sampling_repeated_states.py)", "",
             "Occurrences: logged agent turns of the other agents' dialogues, summed over the held-out agents' tables "
             "(first sample). A shared state is a history reached by more than one dialogue.", "",
             "| benchmark | occurrences | in shared states | shared states | of those, with more than one distinct reply |",
             "|---|---|---|---|---|"]
    params = Params.load(REPO / "params.yaml")
    for name in ("airline", "see2019"):
        b = params.benchmark(name)
        s = shared_states(REPO / b.targets_dir)
        lines.append(f"| {name} | {s['occurrences']:,} | {s['in_shared_states']:,} ({s['in_shared_states'] / s['occurrences']:.1%}) | "
                     f"{s['shared_states']:,} | {s['shared_states_varied']:,} |")

    b = params.benchmark("see2019")
    selfplay = ExperienceStore.open(REPO / b.rollouts)
    own: dict[str, set[str]] = defaultdict(set)
    histories = selfplay.histories()
    for did, agent in zip(selfplay.dialogues.column("dialog_id").to_pylist(), selfplay.dialogues.column("agent_id").to_pylist()):
        if histories[did]:
            own[agent].add(histories[did][0].text)
    lines += ["", "See 2019: openings drawn at the bot-opened chats (turn 0) by each bot's stand-in, against its own:", "",
              "| bot | bot-opened chats | distinct openings drawn | distinct openings in its transcripts |", "|---|---|---|---|"]
    short = 0
    for f in sorted((REPO / b.targets_dir).glob("*.parquet")):
        t = pq.read_table(f, columns=["turn_index", "text", "sample_index"]).to_pylist()
        drawn = [r["text"] for r in t if r["turn_index"] == 0 and r["sample_index"] == 0]
        short += len(set(drawn)) < min(len(own[f.stem]), len(drawn))
        lines.append(f"| {f.stem} | {len(drawn):,} | {len(set(drawn))} | {len(own[f.stem])} |")
    lines += ["", f"Bots drawing fewer distinct openings than they have: {short}."]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sampling_repeated_states.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
