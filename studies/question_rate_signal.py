"""Where the question-rate signal of a See 2019 rating lies: between bots or within a bot's
dialogues, and whether the bots' stand-in replies carry it. A diagnosis of ENIGMA's persona_guess
(docs/estimator.md, "The Q's schedule").

For one rating of a benchmark whose agents are stood in for, the share of agent replies that ask
(contain a question mark), per dialogue and per agent, in three sources: the logged rated
dialogues (the experience), the agent's target replies at the logged states (the stand-in ENIGMA
reads), its self-play rollouts. Correlations:

- per dialogue, pooled over agents, and within agents (both centred on their agent's means):
  what a learner fitted on logged dialogues sees;
- between agents (their means), against each other and against the truth.

    .venv/bin/python studies/question_rate_signal.py see2019 --rating persona_guess

Output: studies/results/question_rate_signal_<benchmark>_<rating>.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import duckdb

from provenance import code_version

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"
ASKS = "avg(case when strpos(text, '?') > 0 then 1.0 else 0.0 end)"


def correlations(con: duckdb.DuckDBPyConnection, store: Path, rollouts: Path, targets: Path, truth: Path, rating: str) -> dict:
    con.execute(f"""
        create temp table d as
        select d.dialog_id, d.agent_id, d."rating_{rating}" as y, t.asks
        from read_parquet('{store}/dialogues.parquet') d
        join (select dialog_id, {ASKS} as asks from read_parquet('{store}/turns.parquet') where role = 'agent' group by 1) t
        using (dialog_id) where d."rating_{rating}" is not null""")
    con.execute(f"""
        create temp table a as
        select agent_id, avg(asks) as logged, avg(y) as logged_rating, s.standin, p.selfplay, tr.value as truth
        from d
        join (select regexp_extract(filename, '([^/]+)\\.parquet$', 1) as agent_id, {ASKS} as standin
              from read_parquet('{targets}/*.parquet', filename = true) group by 1) s using (agent_id)
        left join (select r.agent_id, {ASKS} as selfplay from read_parquet('{rollouts}/turns.parquet') t
                   join read_parquet('{rollouts}/dialogues.parquet') r using (dialog_id) group by 1) p using (agent_id)
        join (select agent_id, value from read_parquet('{truth}') where rating = '{rating}') tr using (agent_id)
        group by agent_id, s.standin, p.selfplay, tr.value""")
    one = lambda q: con.execute(q).fetchone()[0]  # noqa: E731
    return {
        "dialogues": one("select count(*) from d"),
        "agents": one("select count(*) from a"),
        "per_dialogue_pooled": one("select corr(asks, y) from d"),
        "per_dialogue_within_agents": one("""select corr(asks - ma, y - my) from
            (select *, avg(asks) over (partition by agent_id) ma, avg(y) over (partition by agent_id) my from d)"""),
        "between_agents_logged_vs_logged_rating": one("select corr(logged, logged_rating) from a"),
        "between_agents_standin_vs_logged": one("select corr(standin, logged) from a"),
        "between_agents_selfplay_vs_logged": one("select corr(selfplay, logged) from a"),
        "between_agents_standin_vs_truth": one("select corr(standin, truth) from a"),
        "between_agents_logged_vs_truth": one("select corr(logged, truth) from a"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benchmark")
    ap.add_argument("--rating", required=True)
    args = ap.parse_args()

    from enigma.params import Params

    b = Params.load(REPO / "params.yaml").benchmark(args.benchmark)
    if b.rollouts is None:
        raise SystemExit(f"{args.benchmark}: no rollouts (self-play) to compare with")
    out = correlations(duckdb.connect(), b.store, b.rollouts, b.targets_dir, b.truth, args.rating)
    command = shlex.join([".venv/bin/python", "studies/question_rate_signal.py", *sys.argv[1:]])
    lines = [f"# The question-rate signal of {args.rating} ({args.benchmark})", "", f"`{command}`", "",
             f"Code: {code_version()}. {out['dialogues']} rated dialogues, {out['agents']} agents. The share of agent "
             "replies that contain a question mark, correlated (Pearson) with:", "",
             "| what | correlation |", "|---|---|"]
    lines += [f"| {k.replace('_', ' ')} | {v:+.3f} |" for k, v in out.items() if k not in ("dialogues", "agents")]
    tag = f"question_rate_signal_{args.benchmark}_{args.rating}"
    (RESULTS / f"{tag}.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{tag}.json").write_text(json.dumps({"reproduce": command, "code": code_version(), **out}, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
