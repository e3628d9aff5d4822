"""Are a target's replies unlike every logged agent's, and does that mark where ENIGMA is wrong?
(issue 71, dev data only)

For each target agent, each of its sampled replies at the store's logged states is matched to
its nearest logged agent reply (cosine of the frozen encoder's sentence vectors, the cache the
train stage fills) among the replies of the *other* logged agents: leave-one-agent-out for a
seller that is in the store, the whole store for a checkpoint. Per agent: the median of those
nearest-neighbour similarities, and the share of replies whose nearest logged reply is closer
than 0.9 and than 0.8.

Agents: the dev-half sellers of the scored store (``report.split``; no test-half agent is read)
and every checkpoint of a dev checkpoint benchmark (``airline-lm-dev``). ENIGMA's error per
agent is read from the default's dev rows (``studies/dev_rows.py``'s work folder) and from the
checkpoint benchmark's results: does low support mark the agents whose estimate is wrong?

    .venv/bin/python studies/reply_support.py --tag reply_support_airline

Needs ``dvc repro sample@airline``, the dev rows' ``default`` (``studies/dev_rows.py airline``)
and ``studies/lm_checkpoints_dev.py``'s build.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from studies.provenance import code_version  # noqa: E402
from studies.result_files import write_result  # noqa: E402


def nearest_similarity(targets: np.ndarray, pool: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """For each row of ``targets`` (unit vectors), the largest cosine with a row of ``pool``."""
    out = np.empty(len(targets), dtype=np.float32)
    for i in range(0, len(targets), chunk):
        out[i:i + chunk] = (targets[i:i + chunk] @ pool.T).max(axis=1)
    return out


def agent_support(texts: list[str], pool_texts: list[str], vec: dict[str, np.ndarray]) -> dict[str, float]:
    uniq = sorted(set(texts))
    sims = nearest_similarity(np.stack([vec[t] for t in uniq]), np.stack([vec[t] for t in pool_texts]))
    by_text = dict(zip(uniq, sims))
    s = np.array([by_text[t] for t in texts])  # every sampled reply, with multiplicity
    return {"median_nn": float(np.median(s)), "share_0.9": float((s >= 0.9).mean()), "share_0.8": float((s >= 0.8).mean()),
            "replies": len(texts)}


def wording_means(replies: pd.DataFrame, dialogue: dict) -> dict[str, float]:
    """The frozen encoder's two wording blocks, the grounding measures (``enigma.encoders.grounding``)
    and the reply measures (``enigma.reply_measures``), of the replies at (dialog_id, turn_index),
    each reply read after its dialogue's turns before it, averaged over the replies."""
    from enigma.encoders.grounding import GROUNDING_MEASURES, Mentioned, grounding_features
    from enigma.reply_measures import REPLY_MEASURES, reply_measures

    values = []
    for d, t, text in zip(replies.dialog_id, replies.turn_index, replies.text.fillna("")):
        history = dialogue[d][:t]
        said = Mentioned()
        said.extend(history)
        values.append(grounding_features(text, said) + reply_measures(text, history))
    return dict(zip(GROUNDING_MEASURES + REPLY_MEASURES, np.mean(values, axis=0).tolist()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--benchmark", default="airline")
    ap.add_argument("--checkpoints", default="airline-lm-dev")
    ap.add_argument("--params", default="studies/params.yaml")
    ap.add_argument("--dev-rows", default="data/work/dev_rows", help="studies/dev_rows.py's work folder")
    ap.add_argument("--tag", default="reply_support_airline")
    args = ap.parse_args()

    from scipy.stats import spearmanr

    from enigma.dialogue import Turn
    from enigma.encoders.text_cache import EmbeddingCache
    from enigma.evaluation.results import read_results
    from enigma.evaluation.split import split_agents
    from enigma.params import Params

    params = Params.load(ROOT / args.params)
    data = ROOT / params.pipeline.data_dir
    store = data / args.benchmark / "store"
    turns = pd.read_parquet(store / "turns.parquet")
    dialogues = pd.read_parquet(store / "dialogues.parquet")
    logged = turns[turns.role == "agent"].merge(dialogues[["dialog_id", "agent_id"]], on="dialog_id")
    truth = pd.read_parquet(data / args.benchmark / "truth.parquet")

    # targets: the dev-half sellers' sampled replies, and every checkpoint's
    sellers = sorted(p.stem for p in (data / args.benchmark / "targets").glob("*.parquet"))
    dev = [a for a in split_agents(truth.agent_id.unique(), params.report.split, args.benchmark)["dev"] if a in sellers]
    cdir = data / args.checkpoints / "targets"
    checkpoints = sorted(p.stem for p in cdir.glob("*.parquet"))
    frames = {a: pd.read_parquet(data / args.benchmark / "targets" / f"{a}.parquet") for a in dev}
    frames |= {c: pd.read_parquet(cdir / f"{c}.parquet") for c in checkpoints}
    replies = {a: f.text.fillna("").tolist() for a, f in frames.items()}

    c = params.encode.cache  # the train stage's cache: the same namespace, so nothing logged is encoded again
    cache = EmbeddingCache(params.shared.embedding_model, ROOT / params.shared.embedding_cache, batch_size=c.batch_size,
                           max_length=c.max_length, shard_size=c.shard_size, progress=False)
    texts = sorted(set(logged.text) | {t for r in replies.values() for t in r})
    vec = dict(zip(texts, cache.embed(texts)))

    dialogue = {d: [Turn(role=r, text=x) for r, x in zip(g.role, g.text)]
                for d, g in turns.sort_values(["dialog_id", "turn_index"]).groupby("dialog_id")}
    rows = []
    for a, r in replies.items():
        others = set(logged.text[logged.agent_id != a])
        pool = sorted(others)
        copied = float(np.mean([t in others for t in r]))
        rows.append({"agent": a, "kind": "checkpoint" if a in checkpoints else "seller (dev half)", **agent_support(r, pool, vec),
                     "copied": copied, **wording_means(frames[a][frames[a].sample_index == 0], dialogue)})
    table = pd.DataFrame(rows).set_index("agent")
    # the reference a target is compared with: the other dev sellers' replies at the same logged
    # states (a seller's sampled replies, not its own logged ones, which answer other states)
    ref = table[table.kind != "checkpoint"]
    measures = [c for c in ref.columns if c not in ("kind", "replies")]
    # unlike every reference seller: a measure outside the range the others span, by more than a
    # tenth of that range
    for a in table.index:
        others = ref.drop(index=a, errors="ignore")[measures]
        lo, hi = others.min(), others.max()
        margin = 0.1 * (hi - lo)
        out = [m for m in measures if table.loc[a, m] < lo[m] - margin[m] or table.loc[a, m] > hi[m] + margin[m]]
        table.loc[a, "outside"] = ", ".join(out)
        # how far, in the other sellers' own spread: the largest |z| over the measures
        sd = others.std().replace(0, np.nan)
        table.loc[a, "max_z"] = float(((table.loc[a, measures].astype(float) - others.mean()) / sd).abs().max())

    # ENIGMA's error per agent (estimate - truth, mean |.| over the ratings): the dev rows' default
    # for the sellers, the checkpoint benchmark's enigma results for the checkpoints
    sources = [(ROOT / args.dev_rows / args.benchmark / "default", truth),
               (data / args.checkpoints / "results", pd.read_parquet(data / args.checkpoints / "truth.parquet"))]
    for folder, t in sources:
        got = read_results(folder)
        got = got[(got.estimator == "enigma") & got.agent_id.isin(table.index) & got.estimate.notna()]
        got = got.merge(t[["agent_id", "rating", "value"]], on=["agent_id", "rating"])
        for r in got.itertuples():
            table.loc[r.agent_id, f"err_{r.rating}"] = r.estimate - r.value
    errs = table.filter(like="err_")
    table["mean_abs_err"] = errs.abs().mean(axis=1)
    table = table.sort_values(["kind", "median_nn"])
    lines = [f"# Are a target's replies unlike every logged agent's? ({args.benchmark} dev-half sellers, {args.checkpoints})", "",
             f"`.venv/bin/python studies/reply_support.py --benchmark {args.benchmark} --checkpoints {args.checkpoints} "
             f"--tag {args.tag}` (code {code_version(ROOT)})", "",
             "Each sampled reply's nearest logged reply of another agent (cosine of the cached sentence vectors): "
             "the median per agent, and the share at or above 0.9 and 0.8; copied: the share that is a logged reply "
             "of another agent, word for word; names_new ... states_numbers: the grounding block's measures of the "
             "first sample, averaged. err_*: ENIGMA's estimate minus the truth "
             "(the dev rows' default for the sellers, today's enigma for the checkpoints). Dev data only.", "",
             "`outside`: the measures on which an agent lies beyond the range the other dev sellers span, by more "
             "than a tenth of that range; `max_z`: the largest |z| over the measures against the other dev sellers' "
             "mean and standard deviation.", "", table.round(3).to_markdown(), ""]
    for kind, g in table.groupby("kind"):
        rho = spearmanr(g.median_nn, g.mean_abs_err)[0]
        lines.append(f"- {kind}: median nearest-neighbour similarity {g.median_nn.min():.3f} to {g.median_nn.max():.3f}; "
                     f"Spearman(similarity, mean |error|) {rho:+.2f} over {len(g)} agents")
        lines.append(f"- {kind}: {(g.outside != '').sum()} of {len(g)} outside the other dev sellers' range on some measure")
    z_sellers = table[table.kind != "checkpoint"].max_z
    z_checkpoints = table[table.kind == "checkpoint"].max_z
    lines.append(f"- max_z (the largest |z| over the measures, against the other dev sellers' mean and sd): dev sellers "
                 f"{z_sellers.min():.1f} to {z_sellers.max():.1f}, checkpoints {z_checkpoints.min():.1f} to {z_checkpoints.max():.1f}; "
                 f"checkpoints above every seller: {(z_checkpoints > z_sellers.max()).sum()} of {len(z_checkpoints)}")
    lowest = table[table.kind != "checkpoint"].median_nn.min()
    below = table[(table.kind == "checkpoint") & (table.median_nn < lowest)]
    lines.append(f"- checkpoints below every dev seller's median ({lowest:.3f}): {len(below)} of "
                 f"{(table.kind == 'checkpoint').sum()}, their mean |error| {below.mean_abs_err.mean():.3f} against "
                 f"{table[(table.kind == 'checkpoint') & (table.median_nn >= lowest)].mean_abs_err.mean():.3f} for the others")

    write_result(args.tag, lines, {"code": code_version(ROOT), "table": table.reset_index().to_dict(orient="records")})


if __name__ == "__main__":
    main()
