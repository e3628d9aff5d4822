"""Scale: peak memory and wall time of ENIGMA's encode + train for one held-out agent, against
the size of the store and the length of its longest dialogue (issue 18).

The stores are synthetic copies of See 2019 (``data/see2019``: its store and one bot's sampled
replies, so every text is real and already in the embedding cache): ``--copies`` copies of every
dialogue, and a tenth of them lengthened, by appending whole dialogues, to between 7 and
``--longest`` agent turns (log-uniform; one exactly ``longest``), so that the length distribution
has the long tail of today's chat logs. A lengthened turn keeps the target's reply of the turn it
was copied from. ``dice.tmax`` is ``longest + 1``; no interval (it multiplies the train part).

Every case runs in a fresh process (its peak RSS is the process's own), once with this checkout's
code and, with ``--baseline REF``, once with the code at a git ref (a temporary worktree): the two
side by side in one run. A baseline case whose dense feature table alone would exceed
``--dense-limit-gb`` is not run (it would take the machine down) and is reported with that size.

    .venv/bin/dvc repro sample@see2019     # the store and the bot's replies, if not there yet
    .venv/bin/python studies/scale.py --copies 1 4 10 --longest 30 100 300 --baseline <ref>

Output: studies/results/scale.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"
AGENT = "baseline_model"
FEATURE_DIM = 4 * 384 + 16 + 15  # the frozen encoder's pair vector before the PCA


def build(copies: int, longest: int, seed: int = 0):
    """The synthetic store (held-out agent excluded) and the agent's target-action table."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from enigma.store.experience import ExperienceStore

    store = ExperienceStore.open(REPO / "data" / "see2019" / "store").without_agent(AGENT)
    targets = pq.read_table(REPO / "data" / "see2019" / "targets" / f"{AGENT}.parquet")
    replies: dict[tuple[str, int], list[str]] = {}
    for did, t, text, err in zip(*(targets.column(c).to_pylist() for c in ("dialog_id", "turn_index", "text", "error"))):
        if err is None and text is not None:
            replies.setdefault((did, t), []).append(text)
    hist = store.histories()
    dialogues = store.dialogues.to_pylist()
    ids = [d["dialog_id"] for d in dialogues]
    rng = np.random.default_rng(seed)
    n = len(ids) * copies
    long_share = 0.1 if longest > 6 else 0.0
    lengthened = set(rng.choice(n, size=int(long_share * n), replace=False).tolist()) if long_share else set()
    out_d, out_t, out_ta = [], [], []
    for c in range(n):
        src = dialogues[c % len(ids)]
        new_id = f"{src['dialog_id']}~{c // len(ids)}"
        turns = [(src["dialog_id"], t) for t in range(len(hist[src["dialog_id"]]))]
        if c in lengthened:
            want = longest if c == min(lengthened) else int(np.exp(rng.uniform(np.log(7), np.log(longest))))
            j = c
            while sum(hist[a][t].role == "agent" for a, t in turns) < want:
                j = (j + 7919) % len(ids)
                turns += [(ids[j], t) for t in range(len(hist[ids[j]]))]
            agent_seen, cut = 0, len(turns)
            for i, (a, t) in enumerate(turns):
                agent_seen += hist[a][t].role == "agent"
                if agent_seen == want:
                    cut = i + 1
                    break
            turns = turns[:cut]
        out_d.append(dict(src, dialog_id=new_id, n_turns=len(turns)))
        for i, (a, t) in enumerate(turns):
            turn = hist[a][t]
            out_t.append({"dialog_id": new_id, "turn_index": i, "role": turn.role, "text": turn.text})
            if turn.role == "agent":
                for s, text in enumerate(replies[(a, t)]):
                    out_ta.append({"dialog_id": new_id, "turn_index": i, "sample_index": s, "text": text})
    exp = ExperienceStore(pa.Table.from_pylist(out_d, schema=store.dialogues.schema),
                          pa.Table.from_pylist(out_t, schema=store.turns.schema))
    return exp, pa.Table.from_pylist(out_ta)


def agent_turn_counts(exp) -> list[int]:
    from collections import Counter

    import pyarrow.compute as pc

    return list(Counter(exp.turns.filter(pc.equal(exp.turns.column("role"), "agent")).column("dialog_id").to_pylist()).values())


def run_case(copies: int, longest: int) -> dict:
    """One case in this process: build, then encode + train, timed; the peak RSS at the end."""
    import logging
    import resource

    import torch

    from enigma.contracts import HeldOutAgent
    from enigma.estimators import dice_config
    from enigma.ope.estimator import EnigmaEstimator
    from enigma.params import Params

    logging.disable(logging.WARNING)
    torch.set_num_threads(1)  # as each of the train stage's workers runs
    exp, ta = build(copies, longest)
    lengths = agent_turn_counts(exp)
    rss_built = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    params = Params.load(REPO / "params.yaml")
    cfg = dice_config("enigma", params).with_flat(tmax=max(15, max(lengths) + 1), interval_resamples=0, device="cpu")
    est = EnigmaEstimator(cfg, encode=params.encode, progress=False, cache_dir=REPO / "cache" / "embeddings")
    t0 = time.perf_counter()
    out = est.estimate_full(exp, HeldOutAgent(AGENT, target_actions=ta))
    seconds = time.perf_counter() - t0
    return {
        "copies": copies, "longest": max(lengths), "dialogues": len(lengths), "agent_turns": sum(lengths),
        "median_turns": sorted(lengths)[len(lengths) // 2], "tmax": cfg.tmax,
        "seconds": seconds, "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "rss_after_build_gb": rss_built, "reward": out.estimates["reward"]["estimate"],
        "converged": out.converged, "dense_table_gb": len(lengths) * max(lengths) * FEATURE_DIM * 2 * 4 / 2**30,
    }


def spawn(src: Path, copies: int, longest: int, dense_limit: float | None) -> dict:
    if dense_limit is not None:
        # the old layout's two padded feature tables, before any copy: over the limit, not run
        probe = subprocess.run([sys.executable, __file__, "--probe", str(copies), str(longest)], capture_output=True, text=True,
                               env=dict(os.environ, PYTHONPATH=str(REPO / "src")), check=True)
        n_est = json.loads(probe.stdout.strip().splitlines()[-1])
        gb = n_est["dense_table_gb"]
        if gb > dense_limit:
            return dict(n_est, skipped=f"the dense feature tables alone need {gb:.1f} GB (> {dense_limit} GB)")
    proc = subprocess.run([sys.executable, __file__, "--case", str(copies), str(longest)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(src)))
    if proc.returncode != 0:
        return {"copies": copies, "longest": longest, "failed": proc.stderr.strip().splitlines()[-1] if proc.stderr else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] in ("--case", "--probe"):
        copies, longest = int(sys.argv[2]), int(sys.argv[3])
        if sys.argv[1] == "--probe":
            exp, _ = build(copies, longest)
            lengths = agent_turn_counts(exp)
            n, k = len(lengths), max(lengths)
            print(json.dumps({"copies": copies, "longest": k, "dialogues": n, "agent_turns": sum(lengths),
                              "dense_table_gb": n * k * FEATURE_DIM * 2 * 4 / 2**30}))
        else:
            print(json.dumps(run_case(copies, longest)))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, nargs="+", default=[1, 4, 10])
    ap.add_argument("--longest", type=int, nargs="+", default=[6, 30, 100, 300], help="6: See 2019 as it is")
    ap.add_argument("--baseline", default=None, metavar="GIT_REF", help="also run the code at this ref, side by side")
    ap.add_argument("--dense-limit-gb", type=float, default=2.5,
                    help="the old layout's peak was about 5x its two feature tables (10 copies: 12.8 GB at 2.2 GB of tables)")
    ap.add_argument("--tag", default="scale")
    args = ap.parse_args()
    out_json = RESULTS / f"{args.tag}.json"
    # finished cases are kept (a long grid may be run in parts): a case is (code, copies, longest)
    rows = json.loads(out_json.read_text())["rows"] if out_json.is_file() else []
    done = {(r["code"].split(" ")[0], r["copies"], r.get("requested_longest", r["longest"])) for r in rows}

    codes = {"this checkout": REPO / "src"}
    tmp = None
    if args.baseline:
        tmp = tempfile.mkdtemp(prefix="enigma-baseline-")
        subprocess.run(["git", "worktree", "add", "--detach", tmp, args.baseline], cwd=REPO, check=True, capture_output=True)
        codes[f"baseline {args.baseline}"] = Path(tmp) / "src"
    cases = [(c, l) for l in args.longest for c in args.copies]
    try:
        for copies, longest in cases:
            for name, src in codes.items():
                if (name.split(" ")[0], copies, longest) in done:
                    continue
                limit = args.dense_limit_gb if name != "this checkout" else None
                r = dict(spawn(src, copies, longest, limit), code=name, requested_longest=longest)
                print(json.dumps(r), flush=True)
                rows.append(r)
                out_json.parent.mkdir(parents=True, exist_ok=True)
                out_json.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    finally:
        if tmp:
            subprocess.run(["git", "worktree", "remove", "--force", tmp], cwd=REPO, capture_output=True)
    write_table(rows, " ".join([".venv/bin/python", "studies/scale.py", *sys.argv[1:]]), args.tag)


def write_table(rows: list[dict], cmd: str, tag: str) -> None:
    rows = sorted(rows, key=lambda r: (r.get("requested_longest", r["longest"]), r["copies"], r["code"] != "this checkout"))
    lines = ["# Scale: encode + train of one held-out agent (See 2019 copies)", "", f"`{cmd}`", "",
             f"Held-out bot `{AGENT}`; frozen features, the enigma settings of params.yaml with `tmax` = longest + 1 and no "
             "interval; one torch thread; every text already in the embedding cache (encoding throughput is measured apart). "
             "Peak RSS is the process's own, store building included.", "",
             "| code | copies | dialogues | agent turns | longest | seconds | peak RSS GB | RSS after building the store GB | reward estimate |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "seconds" in r:
            lines.append(f"| {r['code']} | {r['copies']} | {r['dialogues']} | {r['agent_turns']} | {r['longest']} | {r['seconds']:.1f} | "
                         f"{r['peak_rss_gb']:.2f} | {r['rss_after_build_gb']:.2f} | {r['reward']:.4f} |")
        else:
            why = r.get("skipped") or f"failed: {r.get('failed')}"
            lines.append(f"| {r['code']} | {r['copies']} | {r.get('dialogues', '')} | {r.get('agent_turns', '')} | {r['longest']} | "
                         f"not run | {why} | | |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{tag}.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{tag}.json").write_text(json.dumps({"command": cmd, "rows": rows}, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
