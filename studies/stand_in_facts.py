"""How much a grounding block can read in each set of target replies: the share of replies that
state a name or a number (``enigma.encoders.frozen``'s facts: capitalised tokens and numbers), and
for target tables with ``source_context``, the share of those facts unsaid in the reply's own
conversation against unsaid in the logged one that retrieved it.

    .venv/bin/python studies/stand_in_facts.py --tag stand_in_facts \\
        --targets 'airline sellers=data/airline/targets' \\
        --targets 'airline stand-in, rollouts=data/work/standin_rollouts_src/airline/targets' \\
        --targets 'See 2019 stand-in, self-play=data/work/standin_see2019_src/see2019/targets'

Each ``--targets NAME=DIR[@STORE]`` is a folder of target tables (one per held-out agent); the
logged conversation is read from STORE (default: the folder's ``../store``). Writes
``studies/results/<tag>.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", action="append", required=True, metavar="NAME=DIR[@STORE]")
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()

    from enigma.encoders.grounding import Mentioned, fact_keys
    from enigma.encoders.sources import source_said
    from enigma.store.experience import ExperienceStore

    rows = []
    for item in args.targets:
        name, _, where = item.partition("=")
        folder, _, store_dir = where.partition("@")
        folder = Path(folder)
        histories = ExperienceStore.open(store_dir or folder.parent / "store").histories()
        n = stating = facts = unsaid_logged = unsaid_source = 0
        files = sorted(folder.glob("*.parquet"))
        for f in files:
            t = pq.read_table(f)
            cols = ["dialog_id", "turn_index", "text"] + (["source_context"] if "source_context" in t.column_names else [])
            for row in t.select(cols).to_pylist():
                if row["text"] is None:
                    continue
                n += 1
                keys = fact_keys(row["text"])
                stated = keys[0] | keys[1]
                if not stated:
                    continue
                stating += 1
                if "source_context" in row:
                    said = Mentioned()
                    said.extend(histories[row["dialog_id"]][: row["turn_index"]])
                    facts += len(stated)
                    unsaid_logged += len(stated - said.words)
                    unsaid_source += len(stated - source_said(row["source_context"]).words)
        share = lambda a, b: f"{a / b:.3f}" if b else "n/a"  # noqa: E731
        rows.append(f"| {name} | {len(files)} | {n} | {share(stating, n)} | {share(unsaid_logged, facts)} | {share(unsaid_source, facts)} |")
        print(rows[-1], flush=True)
    cmd = "`.venv/bin/python studies/stand_in_facts.py --tag " + args.tag + "".join(f" --targets '{t}'" for t in args.targets) + "`"
    text = "\n".join([
        "# What the grounding block can read in each set of target replies", "", cmd, "",
        "Facts are the names (capitalised tokens) and numbers `enigma.encoders.frozen` takes from a reply. "
        "'Unsaid' shares are over the facts of the replies that state any, where the table records each reply's source.", "",
        "| target replies | agents | replies | stating a name or number | facts unsaid in the logged chat | facts unsaid in the reply's own chat |",
        "|---|---|---|---|---|---|", *rows, ""])
    out = REPO / "studies" / "results" / f"{args.tag}.md"
    out.write_text(text)
    print(out)


if __name__ == "__main__":
    main()
