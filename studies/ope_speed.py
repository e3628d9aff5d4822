"""Time to train and estimate one held-out agent with the frozen MiniLM encoder on See 2019.

The experience is See 2019 without one agent (about 3,200 dialogues). The held-out agent's
"replies" are logged agent replies drawn at random from other dialogues (real text of realistic
length; what the target says does not matter for speed, and the real bots cannot be run). The
embedding cache is built first (timed separately); then, as in a leave-one-agent-out study,
the timed part is: pairing the store with the replies, preparing the encoder input from the
warm cache, DICE training and the final estimate.

    .venv/bin/python studies/ope_speed.py        # writes studies/results/ope_speed.{json,md}

Settings are given per row (``ROWS``); each row is one full train+estimate. Figures on the
shared 2-core machine are noisy: compare rows of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import enigma  # noqa: E402,F401  (offline environment)

DATA = REPO / "data" / "raw" / "see2019_convai2_humaneval"
RESULTS = REPO / "studies" / "results"

# name -> overrides of the params.yaml dice section
ROWS: dict[str, dict] = {
    # params.yaml as committed for text until exact_nu became the default (whitened PCA to 32
    # dims, linear heads, gradient descent-ascent with lr 0.5)
    "gradient descent-ascent (params.yaml until exact_nu)": {"preset": "gda", "alpha_nu": 0.0, "lr": 0.5, "lr_scale_lambda": 0.25, "steps": 1000, "log_every": 100},
    "PCA 32, hidden 16, lr 0.5, 1000 steps": {"preset": "gda", "alpha_nu": 0.0, "lr": 0.5, "lr_scale_lambda": 0.25, "log_every": 100, "head_hidden": 16, "steps": 1000},
    "PCA 32, hidden 16, lr 0.5, 1000 steps, zeta normalised per slot": {"preset": "gda", "alpha_nu": 0.0, "lr": 0.5, "lr_scale_lambda": 0.25, "log_every": 100, "head_hidden": 16, "steps": 1000, "slot_normalise": True},
    # the first measurements of this script (same machine, same day): the 1552-d features with
    # 64-unit heads cost 2.56 s per full-batch step (3000 steps: about 2 hours), and lr 2 on
    # unwhitened PCA-64 features with 32-unit heads diverged at step 750 (0.18 s per step).
    # the best row of studies/ope_convergence.py (airline: 24/27 agents meet the stopping rule,
    # 12 s/agent): what it costs on See 2019's larger data, where the budget is 30 s per agent
    "slot-normalised, nu x4, zeta x2, up to 4000 steps with the stopping rule": {
        "preset": "gda", "alpha_nu": 0.0, "lr": 0.5, "lr_scale_lambda": 0.25, "log_every": 100,
        "slot_normalise": True, "lr_scale_nu": 4.0, "lr_scale_zeta": 2.0, "steps": 4000,
        "stop_window": 500, "stop_min_steps": 1000},
    # nu solved in closed form, zeta by Newton steps under the slot constraints (enigma/ope/exact_nu.py),
    # the alpha_nu chosen on airline (studies/results/ope_convergence_exact_nu.md)
    "exact_nu (params.yaml now)": {},
}


def load_store():
    from enigma.params import Params
    from enigma.store.experience import ExperienceStore
    from enigma.store.readers import read

    cfg = Params.load(REPO / "params.yaml").ingest
    result = read("see2019", DATA, cfg, cfg.source("see2019"))
    return ExperienceStore(result.dialogues, result.turns)


def fake_target_actions(store, seed: int, n_samples: int):
    import pyarrow as pa

    rng = random.Random(seed)
    t = store.turns
    pool = [x for x, r in zip(t.column("text").to_pylist(), t.column("role").to_pylist()) if r == "agent"]
    rows = {"dialog_id": [], "turn_index": [], "sample_index": [], "text": [], "error": []}
    for did, ti, role in zip(t.column("dialog_id").to_pylist(), t.column("turn_index").to_pylist(), t.column("role").to_pylist()):
        if role != "agent":
            continue
        for s in range(n_samples):
            rows["dialog_id"].append(did)
            rows["turn_index"].append(ti)
            rows["sample_index"].append(s)
            rows["text"].append(rng.choice(pool))
            rows["error"].append(None)
    return pa.table(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache-dir", default=str(REPO / "cache" / "embeddings"))
    ap.add_argument("--n-samples", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", nargs="*", default=None, help="row names to run")
    ap.add_argument("--tag", default="ope_speed")
    args = ap.parse_args()

    import torch

    from enigma.contracts import HeldOutAgent
    from enigma.encoders.frozen import FrozenPairEncoder
    from enigma.ope import DiceConfig, EnigmaEstimator, pair_dialogues
    from enigma.ope.padding import check_tmax

    torch.set_num_threads(args.threads)
    store = load_store()
    counts: dict[str, int] = {}
    for a in store.dialogues.column("agent_id").to_pylist():
        counts[a] = counts.get(a, 0) + 1
    held_out = max(counts, key=counts.get)
    experience = store.without_agent(held_out)
    ta = fake_target_actions(experience, 0, args.n_samples)
    from enigma.params import Params

    section = dict(Params.load(REPO / "params.yaml").estimators["enigma"].dice)
    longest = max(sum(t.role == "agent" for t in h) for h in experience.histories().values())
    section["tmax"] = max(int(section.get("tmax", 15)), longest + 1)

    encoder = FrozenPairEncoder("minilm", cache_dir=args.cache_dir)
    t0 = time.perf_counter()
    paired = pair_dialogues(experience, ta)
    check_tmax([d.n_agent_turns for d in paired.dialogues], section["tmax"])
    encoder.prepare(paired.dialogues, max(d.n_agent_turns for d in paired.dialogues))
    cache_build_s = time.perf_counter() - t0

    out = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "torch_threads": args.threads, "cuda": torch.cuda.is_available()},
        "data": {"held_out": held_out, "experience_dialogues": experience.dialogues.num_rows, "n_samples": args.n_samples,
                 "longest_agent_turns": longest, "encoder_dim": encoder.dim},
        "cache_build_or_warm_s": round(cache_build_s, 2),
        "rows": [],
    }
    for name, over in ROWS.items():
        if args.only and name not in args.only:
            continue
        cfg = DiceConfig.from_section({**section, **over})
        est = EnigmaEstimator(cfg, encoder=encoder, progress=False)
        t0 = time.perf_counter()
        try:
            res = est.estimate_full(experience, HeldOutAgent(held_out, target_actions=ta))
            status = "ok"
        except Exception as exc:  # a diverged run is a result too
            res, status = None, f"{type(exc).__name__}: {exc}"
        dt = time.perf_counter() - t0
        row = {"config": name, "seconds": round(dt, 2), "status": status, "steps": cfg.solver.steps, "batch_size": cfg.solver.batch_size,
               "head_hidden": cfg.solver.head_hidden}
        if res is not None:
            d = res.diagnostics["all"]
            row.update(steps_run=d["steps"], s_per_100_steps=round(100 * dt / d["steps"], 2), ess_share=round(d["ess_share"], 3), slot_zeta_mean=[round(x, 3) for x in d["slot_zeta_mean"]],
                       estimates={r: round(e["estimate"], 4) for r, e in res.estimates.items()},
                       **({"converged": d["converged"], "grad_max": d["grad_max"], "mass_gap_max": d["mass_gap_max"]} if "converged" in d else {}))
        out["rows"].append(row)
        print(json.dumps(row), flush=True)

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.tag}.json").write_text(json.dumps(out, indent=2) + "\n")
    lines = [
        "# ENIGMA train + estimate time for one held-out agent (frozen MiniLM, See 2019)",
        "",
        f"Held out: `{held_out}`; experience: {out['data']['experience_dialogues']} dialogues; "
        f"{args.n_samples} target reply per state; feature dim {encoder.dim}; torch threads {args.threads}; "
        f"CUDA: {torch.cuda.is_available()}. Encoder cache pass (cold or warm, see json): {cache_build_s:.1f} s.",
        "Target: under 30 s per held-out agent once the cache is built. Reproduce: `.venv/bin/python studies/ope_speed.py`.",
        "",
        "| config | seconds | steps (Newton iterations for exact_nu) | s per 100 steps | status | converged (exact_nu) | ESS share | E_D[zeta] per slot |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in out["rows"]:
        lines.append(f"| {r['config']} | {r['seconds']} | {r.get('steps_run', '')} | {r.get('s_per_100_steps', '')} | {r['status'][:80]} | {r.get('converged', 'n/a')} | {r.get('ess_share', '')} | {r.get('slot_zeta_mean', '')} |")
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
