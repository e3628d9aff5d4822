"""How far off the logs' support are the transcript stand-ins' replies?

For a few See 2019 bots, the direct stand-in (``transcripts:``, the bot's own self-play replies)
and the on-support variant (``transcripts-onsupport:``, snapped to the nearest logged reply)
are sampled at every agent turn of one bot's human logs. A logistic regression on MiniLM reply
embeddings then tries to tell the sampled replies from the logged replies at the same states
(5-fold cross-validated ROC AUC): 0.5 means indistinguishable, 1.0 means fully separable, i.e.
target actions the density ratio cannot cover.

Run from the repository root:  .venv/bin/python studies/sampling_support.py
Writes studies/results/sampling_support.json and .md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "src")]

import numpy as np  # noqa: E402
import torch  # noqa: E402

from enigma.agents.config import AgentSettings, TranscriptSettings  # noqa: E402
from enigma.encoders.text_cache import EmbeddingCache  # noqa: E402
from enigma.params import Params  # noqa: E402
from enigma.sampling.sampler import sample_targets  # noqa: E402
from enigma.store.experience import ExperienceStore  # noqa: E402
from enigma.store.readers import read  # noqa: E402

NOTE = ("The states all come from one logging bot, so even a real, different bot would be separable to a "
        "degree: the AUC measures the shift from the logged replies, which snapping to logged replies "
        "reduces but cannot remove (the replies stay those of a different policy).")

SEE = REPO / "data" / "raw" / "see2019_convai2_humaneval"


def auc_separable(a: np.ndarray, b: np.ndarray, seed: int = 0) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    x = np.vstack([a, b])
    y = np.r_[np.zeros(len(a)), np.ones(len(b))]
    clf = LogisticRegression(max_iter=2000, C=1.0)
    from sklearn.model_selection import StratifiedKFold

    return float(cross_val_score(clf, x, y, cv=StratifiedKFold(5, shuffle=True, random_state=seed), scoring="roc_auc").mean())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--logs", default="baseline_model", help="the bot whose human logs give the states")
    ap.add_argument("--bots", nargs="+", default=["greedy_model", "inquisitive_model_ct_setting07", "repetition_model_setting35"])
    ap.add_argument("--out", type=Path, default=REPO / "studies" / "results" / "sampling_support")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = Params.load(REPO / "params.yaml").ingest
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        emb_dir = REPO / "cache" / "embeddings"
        settings = AgentSettings(transcripts=TranscriptSettings(embed_cache_dir=str(emb_dir)))
        human = read("see2019", SEE / "evallog" / f"{args.logs}.jsonl", cfg)
        hstore = ExperienceStore(human.dialogues, human.turns)
        hstore.write(tmp / "human")
        texts = {(r["dialog_id"], r["turn_index"]): r["text"] for r in hstore.turns.to_pylist()}
        embedder = EmbeddingCache("minilm", cache_dir=emb_dir, progress=False)
        for bot in args.bots:
            sp = read("see2019-selfplay", SEE / "selfplay_hmjiang" / f"{bot}.jsonl", cfg)
            ExperienceStore(sp.dialogues, sp.turns).write(tmp / bot)
            row = {"bot": bot, "states_from": f"human logs of {args.logs}"}
            for kind, spec in (("direct", f"transcripts:{tmp / bot}"),
                               ("onsupport", f"transcripts-onsupport:{tmp / bot}?store={tmp / 'human'}")):
                table = sample_targets(hstore, spec, cache_dir=tmp / "samples", settings=settings, progress=False)
                ok = [r for r in table.to_pylist() if r["error"] is None]
                sampled = [r["text"] for r in ok]
                logged = [texts[(r["dialog_id"], r["turn_index"])] for r in ok]
                row[f"{kind}_n"] = len(ok)
                row[f"{kind}_auc"] = round(auc_separable(embedder.embed(sampled), embedder.embed(logged)), 4)
                row[f"{kind}_exact_logged_reply_share"] = round(float(np.mean([s == g for s, g in zip(sampled, logged)])), 4)
            print(json.dumps(row))
            rows.append(row)
    result = {"benchmark": "sampling_support", "command": ".venv/bin/python studies/sampling_support.py",
              "method": "5-fold CV ROC AUC of logistic regression on MiniLM embeddings: sampled vs logged reply at the same states",
              "rows": rows}
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    lines = ["# Support of the transcript stand-ins' replies", "", f"Command: `{result['command']}`", "",
             result["method"] + " (0.5: indistinguishable; 1.0: fully separable).", "",
             NOTE, "",
             "| bot (stand-in) | states | AUC direct | AUC on-support | on-support = the logged reply itself |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['bot']} | {r['direct_n']} | {r['direct_auc']} | {r['onsupport_auc']} | {r['onsupport_exact_logged_reply_share']} |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
