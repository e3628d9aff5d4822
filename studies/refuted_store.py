"""How well a knowledge base's check against the user's own words (``refutes``) marks a wrong final
action in a rated airline store: a check of the feature against the store's ratings, which ENIGMA
itself never reads (docs/estimator.md, "What the customer said, searched in the table").

Each logged dialogue's final action (its first action tag) is checked as the encoder checks it:
against every customer turn before it. Counted per action status and verdict, with the mean reward
and how many dialogues got the full reward, overall and per logging agent.

    .venv/bin/python studies/refuted_store.py data/airline/store --tag refuted_airline

Output: studies/results/<tag>.{md,json}.
"""

from __future__ import annotations

import argparse
import collections
import json
import shlex
import sys
from pathlib import Path

from enigma.encoders.knowledge import checks_against_user, latest_request, load_knowledge, reads_requests, unrequested
from enigma.sim.language import read_action
from enigma.store.experience import ExperienceStore
from provenance import code_version

RESULTS = Path(__file__).resolve().parent / "results"


def _verdicts(base, store: ExperienceStore):
    """(agent, (request, final status), refuted, unrequested or None, reward) per dialogue with a
    final action; the request and unrequested, the request check's flag, where the base reads
    requests (None otherwise)."""
    table = store.dialogues
    agents = table.column("agent_id").to_pylist()
    reward = table.column("rating_reward").to_pylist()
    for (_, dialogue), agent, r in zip(store.histories().items(), agents, reward):
        for at, turn in enumerate(dialogue):
            if turn.role == "agent" and (action := read_action(turn.text)) is not None:
                said = tuple(t.text for t in dialogue[:at] if t.role == "user")
                request = latest_request(base, dialogue[:at]) if reads_requests(base) else None
                flagged = unrequested(base.lookup(turn.text), request) if reads_requests(base) else None
                yield agent, (request, action.status), base.refutes(turn.text, said), flagged, r
                break


def _cell(rewards: list[float]) -> str:
    if not rewards:
        return "0"
    return f"{len(rewards)} ({sum(rewards) / len(rewards):.2f}, {sum(r == 1.0 for r in rewards)} full)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="a store folder (dialogues.parquet, turns.parquet) with a reward rating")
    ap.add_argument("--knowledge", default="python:enigma.sim.knowledge:airline_checked")
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()
    base = load_knowledge(args.knowledge, "--knowledge")
    if not checks_against_user(base):
        sys.exit(f"--knowledge {args.knowledge!r} does not search itself with the user's words (it has no refutes(reply, user_texts))")
    by_status: dict[tuple[str, bool], list[float]] = collections.defaultdict(list)
    by_agent: dict[tuple[str, bool], list[float]] = collections.defaultdict(list)
    by_request: dict[tuple[float, bool], list[float]] = collections.defaultdict(list)
    by_swap: dict[tuple[str, str], list[float]] = collections.defaultdict(list)  # flagged: (asked, done)
    for agent, (request, status), refuted, asked, reward in _verdicts(base, ExperienceStore.open(args.store)):
        by_status[(status, refuted)].append(reward)
        by_agent[(agent, refuted)].append(reward)
        if asked is not None:
            by_request[(asked, refuted)].append(reward)
        if asked:
            by_swap[(request, status)].append(reward)
    command = shlex.join([".venv/bin/python", "studies/refuted_store.py", *sys.argv[1:]])
    md = [f"# The check against the user's words, against a store's rewards ({args.store})", "",
          f"`{command}` (code: {code_version()})", "",
          f"Each dialogue's final action, checked by `{args.knowledge}` against the customer's turns before it. "
          "A cell: dialogues (their mean reward, how many got the full reward).", "",
          "| final action | refuted | not refuted |", "|---|---|---|"]
    statuses = sorted({s for s, _ in by_status})
    for s in statuses:
        md.append(f"| {s} | {_cell(by_status[(s, True)])} | {_cell(by_status[(s, False)])} |")
    every = {v: [r for (_, f), rs in by_status.items() if f == v for r in rs] for v in (True, False)}
    md.append(f"| all | {_cell(every[True])} | {_cell(every[False])} |")
    if by_request:
        md += ["", "Beside the request check (`unrequested`: the action answers none of what the customer last asked for):", "",
               "| request check | refuted | not refuted |", "|---|---|---|"]
        for asked in (1.0, 0.0):
            md.append(f"| {'flagged' if asked else 'not flagged'} | {_cell(by_request[(asked, True)])} | {_cell(by_request[(asked, False)])} |")
        md += ["", "The flagged actions by what the customer last asked for and what the action did:", "",
               "| asked for | did | dialogues |", "|---|---|---|"]
        md += [f"| {a} | {d} | {_cell(by_swap[(a, d)])} |" for a, d in sorted(by_swap)]
    md += ["", "Per logging agent:", "",
           "| agent | refuted | not refuted |", "|---|---|---|"]
    for agent in sorted({a for a, _ in by_agent}):
        md.append(f"| {agent} | {_cell(by_agent[(agent, True)])} | {_cell(by_agent[(agent, False)])} |")
    summary = lambda rs: {"n": len(rs), "mean_reward": sum(rs) / len(rs) if rs else None, "full_reward": sum(r == 1.0 for r in rs)}  # noqa: E731
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.tag}.md").write_text("\n".join(md) + "\n")
    (RESULTS / f"{args.tag}.json").write_text(json.dumps({
        "reproduce": command, "code": code_version(),
        "by_status": [{"status": s, "refuted": f, **summary(by_status[(s, f)])} for s in statuses for f in (True, False)],
        "by_request_check": [{"unrequested": bool(u), "refuted": f, **summary(by_request[(u, f)])} for u in (1.0, 0.0) for f in (True, False)] if by_request else None,
        "by_swap": [{"asked": a, "did": d, **summary(by_swap[(a, d)])} for a, d in sorted(by_swap)],
        "by_agent": [{"agent": a, "refuted": f, **summary(by_agent[(a, f)])} for a in sorted({a for a, _ in by_agent}) for f in (True, False)],
    }, indent=1) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
