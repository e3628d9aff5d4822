"""Which replies *before* the final action a knowledge base refutes, in a rated airline store: a
check of the every-turn book check (``airline_checked_every_turn``) against the store's ratings,
which ENIGMA itself never reads (docs/estimator.md, "Before the final action").

Every agent turn without an action tag is checked as the encoder checks it: against the customer
turns before it. Counted per logging agent: the dialogues with at least one refuted reply, their
mean reward, and the mean reward of the agent's other dialogues.

    .venv/bin/python studies/refuted_before_final.py data/airline/store --tag refuted_before_final_airline

Output: studies/results/<tag>.{md,json}.
"""

from __future__ import annotations

import argparse
import collections
import json
import shlex
import sys
from pathlib import Path
from statistics import fmean

from enigma.encoders.knowledge import checks_against_user, load_knowledge
from enigma.sim.language import read_action
from enigma.store.experience import ExperienceStore
from provenance import code_version

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_BASE = "python:enigma.sim.knowledge:airline_checked_every_turn"


def refuted_dialogues(base, store: ExperienceStore):
    """(agent, refuted replies before the final action, reward) per dialogue."""
    table = store.dialogues
    agents = table.column("agent_id").to_pylist()
    reward = table.column("rating_reward").to_pylist()
    for (_, dialogue), agent, r in zip(store.histories().items(), agents, reward):
        said: list[str] = []
        refuted = 0
        for turn in dialogue:
            if turn.role == "user":
                said.append(turn.text)
            elif read_action(turn.text) is None:
                refuted += base.refutes(turn.text, tuple(said))
        yield agent, refuted, r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--knowledge", default=DEFAULT_BASE)
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()
    base = load_knowledge(args.knowledge, "--knowledge")
    if not checks_against_user(base):
        sys.exit(f"--knowledge {args.knowledge!r} has no refutes(reply, user_texts)")
    by_agent: dict[str, dict[str, list[float]]] = collections.defaultdict(lambda: {"refuted": [], "other": []})
    replies: collections.Counter[str] = collections.Counter()
    for agent, refuted, reward in refuted_dialogues(base, ExperienceStore.open(args.store)):
        by_agent[agent]["refuted" if refuted else "other"].append(reward)
        replies[agent] += refuted
    rows = [{"agent": a, "refuted_replies": replies[a], "dialogues_refuted": len(v["refuted"]),
             "mean_reward_refuted": fmean(v["refuted"]) if v["refuted"] else None,
             "dialogues_other": len(v["other"]), "mean_reward_other": fmean(v["other"]) if v["other"] else None}
            for a, v in sorted(by_agent.items(), key=lambda kv: (-replies[kv[0]], kv[0]))]
    everything = {"refuted": [r for v in by_agent.values() for r in v["refuted"]],
                  "other": [r for v in by_agent.values() for r in v["other"]]}
    command = " ".join(shlex.quote(x) for x in [".venv/bin/python", "studies/refuted_before_final.py", *sys.argv[1:]])
    out = {"command": command, "code": code_version(), "knowledge": args.knowledge, "store": args.store,
           "dialogues_refuted": len(everything["refuted"]), "mean_reward_refuted": fmean(everything["refuted"]),
           "dialogues_other": len(everything["other"]), "mean_reward_other": fmean(everything["other"]), "agents": rows}

    def f(x):
        return "n/a" if x is None else f"{x:.2f}"

    lines = [f"# Replies before the final action that `{args.knowledge.split(':')[-1]}` refutes: {args.store}", "",
             f"`{command}` (code: {out['code']})", "",
             f"Dialogues with a refuted reply before their final action: {out['dialogues_refuted']} of "
             f"{out['dialogues_refuted'] + out['dialogues_other']}, mean reward {f(out['mean_reward_refuted'])} "
             f"(the others: {f(out['mean_reward_other'])}). The rewards are read here only to check the flag; "
             "ENIGMA never reads them.", "",
             "| logging agent | refuted replies | dialogues with one | their mean reward | other dialogues | their mean reward |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['agent']} | {r['refuted_replies']} | {r['dialogues_refuted']} | {f(r['mean_reward_refuted'])} | "
              f"{r['dialogues_other']} | {f(r['mean_reward_other'])} |" for r in rows if r["refuted_replies"]]
    lines += ["", f"The {sum(1 for r in rows if not r['refuted_replies'])} other logging agents have none."]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.tag}.json").write_text(json.dumps(out, indent=1) + "\n")
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
