"""Throughput of the text encoders on real See 2019 utterances.

Measures, in one run on one machine (figures on a shared machine are noisy; compare the rows
of one run with each other rather than across runs):

1. frozen MiniLM sentence encoding through ``EmbeddingCache``: utterances/s on a cold cache,
   lookups/s on a warm one;
2. ``FrozenPairEncoder``: pairs/s to prepare dialogues whose texts are all new (cold), whose
   logged texts are cached and only the target replies are new (the leave-one-agent-out
   case: one new held-out agent), and fully cached; and the projection of those rates onto
   the whole See 2019 set;
3. ``FinetunePairEncoder`` (MiniLM, packed sequence): forward and forward+backward pairs/s on
   batches of dialogues with S target samples per turn, and the forward time of the same pairs
   encoded one (history, reply) sequence at a time, to show what packing saves.

Target replies are logged agent replies drawn at random from other dialogues (real text of
realistic length; what the target "says" does not matter for speed). Drawn from a pool, some
repeat, so fewer texts than pairs are new; the projection "every sampled reply distinct" is
the bound for an agent whose replies never repeat.

    .venv/bin/python studies/encoders_speed.py            # writes studies/results/encoders_speed.{json,md}
    .venv/bin/python studies/encoders_speed.py --quick    # a smaller smoke run, results not written

A CUDA device is used when present (code path written; unmeasured here: no GPU was lent).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import enigma  # noqa: E402,F401  (offline environment)

DATA = REPO / "data" / "raw" / "see2019_convai2_humaneval"


def load_dialogues():
    from enigma.dialogue import Turn
    from enigma.params import Params
    from enigma.store.readers import read

    cfg = Params.load(REPO / "params.yaml").ingest
    result = read("see2019", DATA, cfg, cfg.source("see2019"))
    turns = result.turns.to_pylist()
    by_dialog: dict[str, list] = {}
    for row in sorted(turns, key=lambda r: (r["dialog_id"], r["turn_index"])):
        by_dialog.setdefault(row["dialog_id"], []).append(Turn(row["role"], row["text"]))
    return by_dialog


def make_actions(by_dialog, ids, n_samples, rng, pool):
    from enigma.encoders.base import DialogueActions

    out = []
    for dialog_id in ids:
        turns = tuple(by_dialog[dialog_id])
        agent_turns = tuple(i for i, t in enumerate(turns) if t.role == "agent")
        targets = tuple(tuple(rng.choice(pool) for _ in range(n_samples)) for _ in agent_turns)
        out.append(DialogueActions(dialog_id, turns, agent_turns, targets))
    return out


def timed(fn, repeat=1):
    """Best wall time over ``repeat`` runs, the CPU time of that run, and the result. CPU time
    (this process, all threads) is what the work costs; wall time also holds waiting for the
    cores other jobs on the shared machine were using."""
    best = (float("inf"), float("inf"))
    result = None
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        result = fn()
        wall, used = time.perf_counter() - start, time.process_time() - cpu
        best = min(best, (wall, used))
    return best[0], best[1], result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "studies" / "results" / "encoders_speed")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    from enigma.encoders.finetune import FinetunePairEncoder
    from enigma.encoders.frozen import FrozenPairEncoder
    from enigma.encoders.text_cache import EmbeddingCache, pick_device

    rng = random.Random(0)
    load_before = os.getloadavg()
    by_dialog = load_dialogues()
    all_ids = sorted(by_dialog)
    total_agent_turns = sum(1 for d in by_dialog.values() for t in d if t.role == "agent")
    total_unique_texts = len({t.text for d in by_dialog.values() for t in d if t.text.strip()})
    pool = [t.text for d in by_dialog.values() for t in d if t.role == "agent" and t.text.strip()]
    rng.shuffle(all_ids)
    n_utt = 300 if args.quick else 800
    n_dialogues = 40 if args.quick else 100
    results: dict = {
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "torch_threads": args.threads,
            "device": pick_device(),
            "load_average_before": load_before,
        },
        "data": {
            "source": "See 2019 ConvAI2 human evaluation (data/raw)",
            "dialogues": len(by_dialog),
            "agent_turns": total_agent_turns,
            "unique_texts": total_unique_texts,
        },
    }

    with tempfile.TemporaryDirectory() as tmp:
        # ---------------------------------------------------------------- 1. sentence encoding
        texts = list(dict.fromkeys(t.text for i in all_ids for t in by_dialog[i] if t.text.strip()))[:n_utt]
        mean_chars = sum(map(len, texts)) / len(texts)
        cache = EmbeddingCache("minilm", Path(tmp) / "emb", progress=False)
        load_s, _, _ = timed(cache._load_model)  # measured apart: a cold cache pays it once
        cold, cold_cpu, _ = timed(lambda: cache.embed(texts))
        warm, _, _ = timed(lambda: EmbeddingCache("minilm", Path(tmp) / "emb", progress=False).embed(texts))
        results["frozen_sentence_encoding"] = {
            "utterances": len(texts),
            "mean_chars": round(mean_chars, 1),
            "model_load_s": round(load_s, 2),
            "cold_utterances_per_s": round(len(texts) / cold, 1),
            "cold_utterances_per_cpu_s": round(len(texts) / cold_cpu, 1),
            "warm_lookups_per_s_incl_opening_cache": round(len(texts) / warm, 1),
        }
        print(json.dumps(results["frozen_sentence_encoding"]), flush=True)

        # ---------------------------------------------------------------- 2. frozen pairs
        ids = all_ids[:n_dialogues]
        enc_cold = FrozenPairEncoder(EmbeddingCache("minilm", Path(tmp) / "pairs", progress=False))
        dialogues = make_actions(by_dialog, ids, 1, rng, pool)
        k = max(d.n_agent_turns for d in dialogues)
        n_pairs = sum(d.n_agent_turns for d in dialogues)  # logged pairs; each also has S target pairs
        enc_cold.cache._load_model()
        t_cold, _, prepared = timed(lambda: enc_cold.prepare(dialogues, k))
        new_agent = make_actions(by_dialog, ids, 1, random.Random(1), pool)  # same logs, other replies
        before = enc_cold.cache.encoded_count
        t_new_agent, cpu_new_agent, _ = timed(lambda: enc_cold.prepare(new_agent, k))
        new_texts = enc_cold.cache.encoded_count - before
        t_warm, _, prepared = timed(lambda: enc_cold.prepare(dialogues, k), repeat=2)
        t_fwd, _, _ = timed(lambda: enc_cold(prepared, torch.arange(len(dialogues))), repeat=3)
        rate_new_agent = n_pairs / t_new_agent
        rate_new_agent_cpu = n_pairs / cpu_new_agent
        per_cpu = results["frozen_sentence_encoding"]["cold_utterances_per_cpu_s"]
        results["frozen_pairs"] = {
            "dialogues": len(dialogues),
            "logged_pairs": n_pairs,
            "target_samples_per_turn": 1,
            "cold_prepare_pairs_per_s": round(n_pairs / t_cold, 1),
            "new_held_out_agent_prepare_pairs_per_s": round(rate_new_agent, 1),
            "new_held_out_agent_prepare_pairs_per_cpu_s": round(rate_new_agent_cpu, 1),
            "new_texts_encoded_for_new_agent": new_texts,
            "warm_prepare_pairs_per_s": round(n_pairs / t_warm, 1),
            "forward_lookup_pairs_per_s": round(n_pairs / t_fwd, 1),
            "projected_see2019_new_agent_encode_s": round(total_agent_turns / rate_new_agent, 1),
            "projected_see2019_new_agent_encode_cpu_s": round(total_agent_turns / rate_new_agent_cpu, 1),
            "projected_see2019_new_agent_all_replies_distinct_cpu_s": round(total_agent_turns / per_cpu, 1),
            "projected_see2019_full_cold_cache_cpu_s": round(total_unique_texts / per_cpu, 1),
        }
        print(json.dumps(results["frozen_pairs"]), flush=True)

    # -------------------------------------------------------------------- 3. finetune
    ft = FinetunePairEncoder("minilm")
    device = ft.device
    rows = []
    batch = 4
    n_batches = 2 if args.quick else 4
    for n_samples in (1, 5):
        fd = make_actions(by_dialog, all_ids[: batch * n_batches], n_samples, random.Random(2), pool)
        k = max(d.n_agent_turns for d in fd)
        prep = ft.prepare(fd, k)
        pairs = sum(d.n_agent_turns * (1 + n_samples) for d in fd)  # logged + target pairs
        lengths = [p.length for p in prep.packs]
        ft.train()

        def fwd_bwd():
            for b in range(n_batches):
                logged, target = ft(prep, torch.arange(b * batch, (b + 1) * batch))
                (logged.square().mean() + target.square().mean()).backward()
            ft.zero_grad(set_to_none=True)

        def fwd():
            with torch.no_grad():
                for b in range(n_batches):
                    ft(prep, torch.arange(b * batch, (b + 1) * batch))

        t_fb, c_fb, _ = timed(fwd_bwd, repeat=2)
        t_f, c_f, _ = timed(fwd, repeat=2)
        rows.append(
            {
                "target_samples_per_turn": n_samples,
                "dialogues": len(fd),
                "batch_dialogues": batch,
                "pairs": pairs,
                "mean_packed_tokens": round(sum(lengths) / len(lengths), 1),
                "forward_pairs_per_s": round(pairs / t_f, 1),
                "forward_backward_pairs_per_s": round(pairs / t_fb, 1),
                "forward_pairs_per_cpu_s": round(pairs / c_f, 1),
                "forward_backward_pairs_per_cpu_s": round(pairs / c_fb, 1),
            }
        )
        print(json.dumps(rows[-1]), flush=True)

    # one (history, reply) sequence per pair, same pairs (S = 1), forward only, for comparison
    fd = make_actions(by_dialog, all_ids[: batch * n_batches], 1, random.Random(2), pool)
    from enigma.dialogue import Turn
    from enigma.encoders.base import DialogueActions

    singles = []
    for d in fd:
        for kk, t in enumerate(d.agent_turns):
            for reply in (d.turns[t].text, d.target_replies[kk][0]):
                # the pair as the only (logged) reply of its own sequence; no target branch
                history = d.turns[:t] + (Turn("agent", reply),)
                singles.append(DialogueActions(f"{d.dialog_id}/{kk}", history, (t,), ((),)))
    sp = ft.prepare(singles, 1)

    def fwd_single():
        with torch.no_grad():
            for b in range(0, len(singles), 8):
                ft(sp, torch.arange(b, min(b + 8, len(singles))))

    t_single, c_single, _ = timed(fwd_single, repeat=2)
    packed_s1 = rows[0]
    results["finetune"] = {
        "model": "minilm",
        "device": str(device),
        "autocast": device.type == "cuda",
        "max_utterance_tokens": ft.max_utterance_tokens,
        "rows": rows,
        "unpacked_forward_pairs_per_s": round(len(singles) / t_single, 1),
        "unpacked_forward_pairs_per_cpu_s": round(len(singles) / c_single, 1),
        "packed_over_unpacked_forward_cpu_speedup_S1": round(packed_s1["forward_pairs_per_cpu_s"] / (len(singles) / c_single), 2),
        "gpu": "unmeasured: no GPU was lent to this task; on CUDA the same code runs under bf16 autocast",
    }
    print(json.dumps({k: v for k, v in results["finetune"].items() if k != "rows"}), flush=True)
    results["machine"]["load_average_after"] = os.getloadavg()

    if args.quick:
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(render_md(results))
    print(f"wrote {args.out.with_suffix('.json')} and .md")


def render_md(r: dict) -> str:
    fs, fp, ft = r["frozen_sentence_encoding"], r["frozen_pairs"], r["finetune"]
    m = r["machine"]
    lines = [
        "# Encoder throughput (studies/encoders_speed.py)",
        "",
        f"Machine: {m['platform']}, {m['cpu_count']} cores shared with other work (load average "
        f"{m['load_average_before'][0]:.1f} before, {m['load_average_after'][0]:.1f} after), torch threads "
        f"{m['torch_threads']}, device {m['device']}. Data: See 2019, {r['data']['dialogues']} dialogues, "
        f"{r['data']['agent_turns']} agent turns, {r['data']['unique_texts']} distinct utterances.",
        "Rates per CPU-second count this process's own CPU time: on the shared, loaded machine they are",
        "the steadier figure; wall-clock rates include waiting for cores.",
        "",
        "## Frozen MiniLM",
        "",
        "| measure | wall | per CPU-second |",
        "|---|---|---|",
        f"| model load (once per process, only on a cache miss) | {fs['model_load_s']} s | |",
        f"| sentence encoding, cold cache ({fs['utterances']} utterances, mean {fs['mean_chars']} chars) | {fs['cold_utterances_per_s']} utt/s | {fs['cold_utterances_per_cpu_s']} utt/s |",
        f"| cache hits (a new process opening the cache + lookups) | {fs['warm_lookups_per_s_incl_opening_cache']} texts/s | |",
        f"| pairs, everything new ({fp['dialogues']} dialogues, {fp['logged_pairs']} agent turns, S=1) | {fp['cold_prepare_pairs_per_s']} pairs/s | |",
        f"| pairs, logs cached, a new held-out agent's replies new ({fp['new_texts_encoded_for_new_agent']} texts encoded) | {fp['new_held_out_agent_prepare_pairs_per_s']} pairs/s | {fp['new_held_out_agent_prepare_pairs_per_cpu_s']} pairs/s |",
        f"| pairs, all cached (prepare) | {fp['warm_prepare_pairs_per_s']} pairs/s | |",
        f"| forward (table lookup) | {fp['forward_lookup_pairs_per_s']} pairs/s | |",
        f"| projected: one new held-out agent on all of See 2019 (S=1), at the rate above | {fp['projected_see2019_new_agent_encode_s']} s | {fp['projected_see2019_new_agent_encode_cpu_s']} CPU-s |",
        f"| projected: the same if every sampled reply is distinct ({r['data']['agent_turns']} texts) | | {fp['projected_see2019_new_agent_all_replies_distinct_cpu_s']} CPU-s |",
        f"| projected: building the cache for all See 2019 utterances | | {fp['projected_see2019_full_cold_cache_cpu_s']} CPU-s |",
        "",
        "## Fine-tuned MiniLM, packed sequence, CPU",
        "",
        "| S (target samples) | batch | mean packed tokens | forward pairs/s (per CPU-s) | forward+backward pairs/s (per CPU-s) |",
        "|---|---|---|---|---|",
    ]
    for row in ft["rows"]:
        lines.append(
            f"| {row['target_samples_per_turn']} | {row['batch_dialogues']} dialogues | {row['mean_packed_tokens']} | "
            f"{row['forward_pairs_per_s']} ({row['forward_pairs_per_cpu_s']}) | "
            f"{row['forward_backward_pairs_per_s']} ({row['forward_backward_pairs_per_cpu_s']}) |"
        )
    lines += [
        "",
        f"Pairs count the logged and the target pairs. The same S=1 pairs encoded one (history, reply) "
        f"sequence each: {ft['unpacked_forward_pairs_per_s']} pairs/s forward ({ft['unpacked_forward_pairs_per_cpu_s']} "
        f"per CPU-s), so the packed pass costs {ft['packed_over_unpacked_forward_cpu_speedup_S1']}x less CPU per pair.",
        "",
        f"GPU: {ft['gpu']}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
