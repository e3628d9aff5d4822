"""The comparators that run without the bots on See et al. 2019 (ConvAI2 human evaluation):
leave-one-agent-out over the 27 bots that have self-play transcripts, each estimator scored by
the project's report code (per-rating Pearson/Spearman/Kendall, bootstrap intervals).

Regimes here: none (experience mean) and own-rollouts (the bots' self-play chats). The
replies-at-logged-states comparators (BLEU, ROUGE-L, BERTScore, perplexity) need the bots' replies
at logged states, which cannot be produced here (the bots are not runnable).

    .venv/bin/python studies/comparators_see2019.py [--out studies/results] [--work DIR]

Writes ``<out>/comparators_see2019.json`` (the report summary) and ``.md`` (a table). Per-agent
results are kept under ``--work`` so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd
import torch

import enigma  # noqa: F401  (offline environment)
from enigma.evaluation.heldout import HeldOutSources
from enigma.evaluation.loao import run_loao
from enigma.evaluation.results import RESULT_COLUMNS
from enigma.evaluation.summary import build_summary
from enigma.evaluation.truth import truth_from_store
from enigma.estimators import COMPARATORS
from enigma.params import Params
from enigma.store.experience import ExperienceStore
from enigma.store.readers import see2019, see2019_selfplay

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "raw" / "see2019_convai2_humaneval"

# cheapest first: text-only features, then those that embed agent replies, then all turns
ESTIMATORS = ["experience-mean", "reply-length-rollouts"] + [
    f"see-{f}-rollouts" for f in ("self-repetition", "internal-repetition", "partner-repetition", "question-rate", "specificity")
] + ["spe-ridge", "spe-sigmoid", "see-relatedness-rollouts", "see-ridge-rollouts", "autojudge", "dynaeval-rollouts"]


def saved_results(work: Path, agents: list[str]) -> pd.DataFrame:
    """The per-(estimator, agent) result files the runner saved, for the estimators that have
    one for every agent."""
    rows = [r for f in sorted(work.glob("*/*.json")) for r in json.loads(f.read_text())["rows"]]
    df = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    complete = [e for e, g in df.groupby("estimator") if set(agents) <= set(g["agent_id"]) and g["error"].isna().all()]
    return df[df["estimator"].isin(complete)].reset_index(drop=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "studies" / "results"))
    ap.add_argument("--work", default=str(ROOT / ".cache" / "bench-comparators-see2019"))
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--skip", default="", help="comma-separated estimator names to leave out")
    ap.add_argument(
        "--summarise-only", action="store_true",
        help="report the results already saved under --work (estimators finished for every agent)",
    )
    args = ap.parse_args()
    torch.set_num_threads(2)

    ingest = Params.load(args.params).ingest
    r = see2019.read(DATA, ingest)
    store = ExperienceStore(r.dialogues, r.turns, r.rejects)
    r = see2019_selfplay.read(DATA, ingest)
    selfplay = ExperienceStore(r.dialogues, r.turns, r.rejects)
    agents = sorted(set(store.agents()) & set(selfplay.agents()))

    t0 = time.perf_counter()
    if args.summarise_only:
        results = saved_results(Path(args.work), agents)
    else:
        config = Params.load(args.params).comparators
        skip = {x for x in args.skip.split(",") if x}
        estimators = [COMPARATORS[n](config) for n in ESTIMATORS if n not in skip]
        sources = HeldOutSources(rollouts=lambda a: selfplay.filter_agents(keep={a}))
        results = run_loao(store, estimators, sources, agents=agents, results_dir=args.work, errors="record")
    seconds = time.perf_counter() - t0
    summary, _ = build_summary(results, truth_from_store(store), "see2019-comparators")
    summary["run"] = {
        "agents": agents,
        "n_experience_dialogues": store.dialogues.num_rows,
        "n_selfplay_dialogues": selfplay.dialogues.num_rows,
        "wall_seconds_this_run": round(seconds, 1),
        "median_seconds_per_agent": results.groupby("estimator")["seconds"].median().round(2).to_dict(),
        "note": "seconds are on a shared 2-core machine and include first-time embedding of the texts",
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "comparators_see2019.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    lines = [
        "# Comparators on See et al. 2019 (leave-one-agent-out, 27 bots with self-play)",
        "",
        f"Reproduce: `.venv/bin/python studies/comparators_see2019.py` ({len(agents)} agents,"
        f" {len(summary['ratings'])} ratings; 95% percentile-bootstrap intervals over agents).",
        "",
        "| estimator | regime | mean Pearson [95% CI] | mean Spearman [95% CI] | mean Kendall |",
        "|---|---|---|---|---|",
    ]

    def f(v):
        return "nan" if v is None else f"{v:.3f}"

    for row in summary["ranking"]:
        e = summary["estimators"][row["estimator"]]
        p, s = e["mean_pearson_ci95"], e["mean_spearman_ci95"]
        lines.append(
            f"| {row['estimator']} | {','.join(e['regime'])} | {f(e['mean_pearson'])} [{f(p[0])}, {f(p[1])}]"
            f" | {f(e['mean_spearman'])} [{f(s[0])}, {f(s[1])}] | {f(e['mean_kendall'])} |"
        )
    lines += ["", "Per rating (Pearson):", "", "| estimator | " + " | ".join(summary["ratings"]) + " |",
              "|---|" + "---|" * len(summary["ratings"])]
    for row in summary["ranking"]:
        e = summary["estimators"][row["estimator"]]
        lines.append(f"| {row['estimator']} | " + " | ".join(f(e[r]["pearson"]) for r in summary["ratings"]) + " |")
    lines += [
        "",
        "Notes:",
        "- experience-mean is the other agents' mean rating: leaving an agent out moves that mean against",
        "  the agent, hence a correlation near -1 with a collapsed spread (flagged): no skill.",
        "- Single features and their ridge combination are fitted per rating on the other agents' rated",
        "  human-bot dialogues (dialogue level) and applied to the held-out bot's self-play chats.",
        "- SPE: frozen MiniLM mean reply embedding + self-repetition + question rate, ridge or sigmoid head.",
        "  The paper's own SPE (selfplay_est_hmjiang.csv) scores 0.591 / 0.435 (mean Pearson / Spearman).",
        "- Estimators missing here did not finish for every agent in the run (see the cost file).",
    ]
    if summary["errors"]:
        lines += ["", f"Errors: {len(summary['errors'])} (see the JSON)."]
    (out / "comparators_see2019.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
