"""GPU paths of the text encoders and of the ENIGMA estimator, timed on See 2019.

Measures, in one run on a CUDA device:

1. frozen MiniLM sentence encoding through ``EmbeddingCache`` on a cold cache, over every
   distinct See 2019 utterance (what building the embedding cache costs on the GPU), at the
   params.yaml batch size (64) and a larger one; model load time; and a check that the GPU's
   bf16-autocast vectors agree with float32 vectors computed on the CPU;
2. ``FinetunePairEncoder`` (MiniLM, packed sequence with the 2-D mask, bf16 autocast): forward
   and forward+backward pairs/s at S = 1 and 5 target samples per turn for several batch sizes,
   timed between ``torch.cuda.synchronize()`` calls after a warm-up, with the peak GPU memory
   of each row (``torch.cuda.max_memory_allocated``); and a check that the autocast vectors
   agree with float32 vectors computed on the CPU;
3. end to end: ``EnigmaEstimator`` with ``encoder: finetune`` trains and estimates one held-out
   See 2019 agent (the largest, as studies/ope_speed.py does; about 3,200 experience
   dialogues) on mini-batches, once per S in ``--n-samples`` (1 and 5). The "replies" of the held-out agent are logged agent replies
   drawn at random from other dialogues (as in ope_speed.py: real text of realistic length;
   what the target says does not matter for speed). Optimiser steps are timed with a global
   optimiser hook and the full-data diagnostic passes (every ``log_every`` steps) by wrapping
   ``enigma.ope.diagnostics.evaluate`` (with a ``cuda.synchronize()`` on each side), so seconds
   per step exclude them; the projection to a leave-one-agent-out study adds them back.

The CPU figures it compares with are those of studies/results/encoders_speed.json.

    .venv/bin/python studies/encoders_gpu.py                  # CUDA: writes studies/results/encoders_gpu.{json,md}
    .venv/bin/python studies/encoders_gpu.py --quick          # tiny smoke run (CPU or CUDA); writes nothing
    .venv/bin/python studies/encoders_gpu.py --data DIR --model DIR   # See 2019 folder / local HF model directory

On a CPU the script runs too (use ``--quick``) but writes results only with ``--write``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import random
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))  # studies: the CPU scripts' helpers

import enigma  # noqa: E402,F401  (offline environment)
from studies.encoders_speed import make_actions  # noqa: E402  (target replies drawn from logged ones)
from studies.ope_speed import fake_target_actions  # noqa: E402
import numpy as np  # noqa: E402

DATA = REPO / "data" / "raw" / "see2019_convai2_humaneval"
OUT = REPO / "studies" / "results" / "encoders_gpu"
CPU_RESULTS = REPO / "studies" / "results" / "encoders_speed.json"


# --------------------------------------------------------------------------- helpers
def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def clock() -> float:
    sync()
    return time.perf_counter()


def load_store(data_dir: Path):
    from enigma.params import Params
    from enigma.store.experience import ExperienceStore
    from enigma.store.readers import read

    cfg = Params.load(REPO / "params.yaml").ingest
    result = read("see2019", data_dir, cfg, cfg.source("see2019"))
    return ExperienceStore(result.dialogues, result.turns)


def dialogues_by_id(store):
    from enigma.dialogue import Turn

    out: dict[str, list] = {}
    rows = store.turns.sort_by([("dialog_id", "ascending"), ("turn_index", "ascending")])
    for did, role, text in zip(*(rows.column(c).to_pylist() for c in ("dialog_id", "role", "text"))):
        out.setdefault(did, []).append(Turn(role, text))
    return out


def cosine_stats(a, b) -> dict:
    import torch

    a, b = a.reshape(-1, a.shape[-1]).float(), b.reshape(-1, b.shape[-1]).float()
    keep = (a.abs().sum(-1) > 0) | (b.abs().sum(-1) > 0)
    cos = torch.nn.functional.cosine_similarity(a[keep], b[keep], dim=-1)
    rel = (a[keep] - b[keep]).norm(dim=-1) / b[keep].norm(dim=-1).clamp_min(1e-12)
    return {"vectors": int(keep.sum()), "cosine_min": round(float(cos.min()), 5), "cosine_mean": round(float(cos.mean()), 6),
            "relative_error_max": round(float(rel.max()), 4), "relative_error_mean": round(float(rel.mean()), 5)}


def peak_gib() -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 3) if torch.cuda.is_available() else None


def reset_peak() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


# --------------------------------------------------------------------------- 1. sentence encoding
def bench_sentences(args, texts: list[str], device: str) -> dict:
    import torch

    from enigma.encoders.text_cache import EmbeddingCache

    out: dict = {"utterances": len(texts), "mean_chars": round(sum(map(len, texts)) / len(texts), 1), "rows": []}
    model = tokenizer = None
    with tempfile.TemporaryDirectory() as tmp:
        for i, bs in enumerate(args.sentence_batch_sizes):
            cache = EmbeddingCache(args.model, Path(tmp) / f"b{bs}", batch_size=bs, device=device, progress=False)
            if model is None:
                t0 = clock()
                cache._load_model()  # tokenizer + weights from disk, moved to the device
                out["model_load_s"] = round(clock() - t0, 2)
                model, tokenizer = cache._model, cache._tokenizer
                # warm-up (kernels, allocator) on texts of every length, not stored
                for chunk in (texts[:bs], sorted(texts, key=len)[-bs:]):
                    cache._encode_batch(chunk)
                sync()
            cache._model, cache._tokenizer = model, tokenizer
            reset_peak()
            t0 = clock()
            cache.embed(texts)  # cold cache: tokenise, encode, write the shards
            dt = clock() - t0
            row = {"batch_size": bs, "seconds": round(dt, 2), "utterances_per_s": round(len(texts) / dt, 1),
                   "encoded": cache.encoded_count, "peak_gpu_gib": peak_gib()}
            out["rows"].append(row)
            print("sentences", json.dumps(row), flush=True)

        # agreement of the GPU path (bf16 autocast) with float32 on the CPU, 512 texts of all lengths
        sample = sorted(texts, key=len)[:: max(1, len(texts) // 512)][:512]
        gpu_vecs = torch.from_numpy(np.concatenate([cache._encode_batch(sample[i : i + 64]) for i in range(0, len(sample), 64)]))
        cpu = copy.deepcopy(model).float().to("cpu")
        cache._model = cpu
        cpu_vecs = torch.from_numpy(np.concatenate([cache._encode_batch(sample[i : i + 64]) for i in range(0, len(sample), 64)]))
        cache._model = model
        out["check_vs_cpu_float32"] = cosine_stats(gpu_vecs, cpu_vecs)
        print("sentences check", json.dumps(out["check_vs_cpu_float32"]), flush=True)
    return out


# --------------------------------------------------------------------------- 2. fine-tuned encoder
def bench_finetune(args, by_dialog, ids, pool, device) -> dict:
    import torch

    from enigma.encoders.finetune import FinetunePairEncoder

    t0 = clock()
    ft = FinetunePairEncoder(args.model)
    load_cpu = time.perf_counter() - t0
    ft = ft.to(device)
    load_s = clock() - t0
    out = {"model_load_s": round(load_s, 2), "model_load_to_cpu_s": round(load_cpu, 2), "device": str(ft.device),
           "autocast_dtype": ("bfloat16" if torch.cuda.is_bf16_supported() else "float16") if ft.device.type == "cuda" else None,
           "max_utterance_tokens": ft.max_utterance_tokens, "rows": []}
    ft.train()
    for n_samples in (1, 5):
        for batch in args.ft_batch_sizes:
            n_batches = args.ft_batches
            fd = make_actions(by_dialog, ids[: batch * n_batches], n_samples, random.Random(2), pool)
            k = max(d.n_agent_turns for d in fd)
            prep = ft.prepare(fd, k)
            pairs = sum(d.n_agent_turns * (1 + n_samples) for d in fd)  # logged + target pairs
            lengths = [p.length for p in prep.packs]
            index = [torch.arange(b * batch, (b + 1) * batch) for b in range(n_batches)]
            padded = sum(max(lengths[b * batch : (b + 1) * batch]) * batch for b in range(n_batches))

            def fwd():
                with torch.no_grad():
                    for idx in index:
                        ft(prep, idx)

            def fwd_bwd():
                for idx in index:
                    logged, target = ft(prep, idx)
                    (logged.square().mean() + target.square().mean()).backward()
                ft.zero_grad(set_to_none=True)

            reset_peak()
            times = {}
            for name, fn in (("forward", fwd), ("forward_backward", fwd_bwd)):
                fn()  # warm-up: the same shapes as the timed passes
                runs = []
                for _ in range(args.repeat):
                    t0 = clock()
                    fn()
                    runs.append(clock() - t0)
                times[name] = min(runs)
            row = {
                "target_samples_per_turn": n_samples, "batch_dialogues": batch, "batches_timed": n_batches,
                "pairs": pairs, "mean_packed_tokens": round(sum(lengths) / len(lengths), 1),
                "padded_tokens_per_batch": round(padded / n_batches, 1),
                "forward_pairs_per_s": round(pairs / times["forward"], 1),
                "forward_backward_pairs_per_s": round(pairs / times["forward_backward"], 1),
                "forward_s_per_batch": round(times["forward"] / n_batches, 4),
                "forward_backward_s_per_batch": round(times["forward_backward"] / n_batches, 4),
                "forward_backward_tokens_per_s": round(padded / times["forward_backward"], 0),
                "peak_gpu_gib": peak_gib(),
            }
            out["rows"].append(row)
            print("finetune", json.dumps(row), flush=True)

    # agreement of the CUDA path (bf16 autocast, SDPA with the 2-D mask) with float32 on the CPU
    fd = make_actions(by_dialog, ids[:16], 5, random.Random(3), pool)
    prep = ft.prepare(fd, max(d.n_agent_turns for d in fd))
    idx = torch.arange(len(fd))
    with torch.no_grad():
        g_logged, g_target = (x.cpu() for x in ft(prep, idx))
        cpu = copy.deepcopy(ft).to("cpu")
        c_logged, c_target = cpu(prep, idx)
    out["check_vs_cpu_float32"] = {
        "dialogues": len(fd), "target_samples_per_turn": 5,
        "logged": cosine_stats(g_logged, c_logged), "target": cosine_stats(g_target, c_target),
    }
    print("finetune check", json.dumps(out["check_vs_cpu_float32"]), flush=True)
    del ft, cpu
    return out


# --------------------------------------------------------------------------- 3. end to end
def bench_end_to_end(args, store, n_samples: int) -> dict:

    import enigma.ope.diagnostics as diagnostics
    import enigma.ope.trainer as trainer
    from enigma.contracts import HeldOutAgent
    from enigma.params import Params
    from enigma.ope import DiceConfig, EnigmaEstimator

    counts: dict[str, int] = {}
    for a in store.dialogues.column("agent_id").to_pylist():
        counts[a] = counts.get(a, 0) + 1
    held_out = max(counts, key=counts.get)
    experience = store.without_agent(held_out)
    if args.quick:  # a small slice of the experience
        from enigma.store.experience import ExperienceStore

        import pyarrow.compute as pc

        dialogues = experience.dialogues.slice(0, args.quick_dialogues)
        turns = experience.turns.filter(pc.is_in(experience.turns.column("dialog_id"), dialogues.column("dialog_id")))
        experience = ExperienceStore(dialogues, turns)
    ta = fake_target_actions(experience, 0, n_samples)
    longest = max(sum(t.role == "agent" for t in h) for h in experience.histories().values())
    settings = {"encoder": "finetune", "encoder_model": str(args.model), "tmax": max(15, longest + 1), "steps": args.steps,
                "batch_size": args.batch_size, "log_every": args.log_every, "seed": 0, "device": "auto"}
    base = DiceConfig.preset(args.preset)
    if base.schedule == "inverse_sqrt" and base.warmup_steps >= args.steps:  # only in a tiny --quick run
        settings["warmup_steps"] = args.steps // 2
    cfg = DiceConfig.preset(args.preset, **settings)
    encode = Params.load(REPO / "params.yaml").encode

    # instrumentation (timing only; nothing of the computation changes)
    steps: list[float] = []
    evals: list[tuple[float, float]] = []
    prep_s: list[float] = []
    batch_s = {"train": 0.0, "eval": 0.0}  # CPU time building padded inputs and 2-D masks (batch_tensors)
    in_eval = [False]
    from torch.optim.optimizer import register_optimizer_step_post_hook

    hook = register_optimizer_step_post_hook(lambda opt, a, k: steps.append(time.perf_counter()))
    original_evaluate = trainer.evaluate

    def timed_evaluate(*a, **k):
        t0 = clock()
        in_eval[0] = True
        try:
            return original_evaluate(*a, **k)
        finally:
            in_eval[0] = False
            evals.append((t0, clock()))

    # the diagnostic passes (learning-curve rows) and the final pass
    diagnostics.evaluate = trainer.evaluate = timed_evaluate
    est = EnigmaEstimator(cfg, encode=encode, progress=False)
    reset_peak()
    t0 = clock()
    encoder = est.encoder()  # FinetunePairEncoder from the model directory (CPU), as a study builds it once
    load_s = clock() - t0
    original_prepare = encoder.prepare

    def timed_prepare(*a, **k):
        t = time.perf_counter()
        try:
            return original_prepare(*a, **k)
        finally:
            prep_s.append(time.perf_counter() - t)

    encoder.prepare = timed_prepare
    original_batch = encoder.batch_tensors

    def timed_batch(*a, **k):
        t = time.perf_counter()
        try:
            return original_batch(*a, **k)
        finally:
            batch_s["eval" if in_eval[0] else "train"] += time.perf_counter() - t

    encoder.batch_tensors = timed_batch
    status, res = "ok", None
    t0 = clock()
    try:
        res = est.estimate_full(experience, HeldOutAgent(held_out, target_actions=ta))
    except Exception as exc:  # a diverged run is a result too (its time still counts)
        status = f"{type(exc).__name__}: {exc}"
    total = clock() - t0
    hook.remove()
    diagnostics.evaluate = trainer.evaluate = original_evaluate
    del encoder.prepare, encoder.batch_tensors

    # seconds per optimiser step: between consecutive steps, leaving out the intervals that
    # hold a diagnostic pass (a pass runs between two steps)
    gaps = []
    for a, b in zip(steps, steps[1:]):
        if not any(a <= e0 < b for e0, _ in evals):
            gaps.append(b - a)
    eval_s = [b - a for a, b in evals]
    steps_run = len(steps)
    per_step_mean = statistics.fmean(gaps) if gaps else float("nan")
    blocks = []  # mean step time per block of log_every steps (stability)
    for j in range(0, len(gaps), args.log_every):
        part = gaps[j : j + args.log_every]
        blocks.append(round(statistics.fmean(part), 4))
    out = {
        "held_out": held_out,
        "experience_dialogues": experience.dialogues.num_rows,
        "target_samples_per_turn": n_samples,
        "preset": args.preset,
        "settings": cfg.model_dump(mode="json"),
        "encode_finetune": encode.finetune.model_dump(mode="json"),
        "status": status,
        "encoder_load_s": round(load_s, 2),
        "prepare_s": round(sum(prep_s), 2),
        "total_s": round(total, 2),
        "steps_run": steps_run,
        "s_per_step_mean": round(per_step_mean, 4),
        "s_per_step_median": round(statistics.median(gaps), 4) if gaps else None,
        "s_per_step_p90": round(sorted(gaps)[int(0.9 * (len(gaps) - 1))], 4) if gaps else None,
        "s_per_step_by_block": blocks,
        "step_time_total_s": round(per_step_mean * steps_run, 2) if gaps else None,
        "batch_tensors_s_per_step": round(batch_s["train"] / max(steps_run, 1), 4),
        "batch_tensors_s_in_diagnostic_passes": round(batch_s["eval"], 2),
        "diagnostic_passes": len(evals),
        "diagnostic_pass_s": [round(x, 2) for x in eval_s],
        "peak_gpu_gib": peak_gib(),
    }
    if res is not None:
        d = res.diagnostics["all"]
        out.update(
            n_dialogues=res.diagnostics["n_dialogues"],
            ess_share=round(d["ess_share"], 4),
            zeta_mean=round(d["zeta_mean"], 4),
            slot_zeta_mean=[round(x, 3) for x in d["slot_zeta_mean"]],
            estimates={r: round(e["estimate"], 4) for r, e in res.estimates.items()},
            curve_last=res.curves["all"][-1] if res.curves.get("all") else None,
        )
    # projection to a leave-one-agent-out study: per agent, prepare + steps + diagnostic passes
    # (+ the final pass); the model is loaded once per study
    pass_s = statistics.median(eval_s) if eval_s else 0.0
    def per_agent(n_steps: int) -> float:
        passes = n_steps // args.log_every + (0 if n_steps % args.log_every == 0 else 1) + 1
        return sum(prep_s) + n_steps * per_step_mean + passes * pass_s

    out["projection"] = {
        "per_agent_s_measured": round(total, 1),
        "per_agent_s_at": {str(n): round(per_agent(n), 1) for n in sorted({args.steps, 1000, 3000})},
        "study_min": {f"{agents} agents, {n} steps": round((load_s + agents * per_agent(n)) / 60, 1)
                      for agents in (27, 29) for n in sorted({args.steps, 3000})},
        "note": "per agent = prepare + steps x s/step (mean) + (steps/log_every + 1) diagnostic passes x median pass time; "
                "the model loaded once per study; experience sizes of the other agents differ by under 2%",
    }
    print("end_to_end", json.dumps({k: v for k, v in out.items() if k not in ("settings", "curve_last")}), flush=True)
    return out


# --------------------------------------------------------------------------- report
def ratio(a, b):
    return round(a / b, 1) if a and b else None


def compare_cpu(r: dict) -> dict:
    if not CPU_RESULTS.is_file():
        return {}
    cpu = json.loads(CPU_RESULTS.read_text())
    fs = cpu["frozen_sentence_encoding"]
    best = max(r["sentences"]["rows"], key=lambda x: x["utterances_per_s"])
    b64 = next((x for x in r["sentences"]["rows"] if x["batch_size"] == 64), best)
    out = {
        "cpu_machine": f"{cpu['machine']['platform']}, {cpu['machine']['cpu_count']} shared cores, torch threads {cpu['machine']['torch_threads']}",
        "sentences": {
            "cpu_utt_per_s": fs["cold_utterances_per_s"], "cpu_utt_per_cpu_s": fs["cold_utterances_per_cpu_s"],
            "gpu_batch64_over_cpu_wall": ratio(b64["utterances_per_s"], fs["cold_utterances_per_s"]),
            "gpu_batch64_over_cpu_per_cpu_s": ratio(b64["utterances_per_s"], fs["cold_utterances_per_cpu_s"]),
            "gpu_best_over_cpu_wall": ratio(best["utterances_per_s"], fs["cold_utterances_per_s"]),
            "gpu_best_over_cpu_per_cpu_s": ratio(best["utterances_per_s"], fs["cold_utterances_per_cpu_s"]),
            "gpu_best_batch": best["batch_size"],
            "model_load_cpu_s": fs["model_load_s"],
            "cache_build_cpu_projected_cpu_s": cpu["frozen_pairs"]["projected_see2019_full_cold_cache_cpu_s"],
        },
        "finetune": [],
    }
    for c in cpu["finetune"]["rows"]:
        s = c["target_samples_per_turn"]
        gpu_rows = [x for x in r["finetune"]["rows"] if x["target_samples_per_turn"] == s]
        same = next((x for x in gpu_rows if x["batch_dialogues"] == c["batch_dialogues"]), None)
        top = max(gpu_rows, key=lambda x: x["forward_backward_pairs_per_s"]) if gpu_rows else None
        out["finetune"].append({
            "target_samples_per_turn": s, "cpu_batch": c["batch_dialogues"],
            "cpu_forward": c["forward_pairs_per_s"], "cpu_forward_per_cpu_s": c["forward_pairs_per_cpu_s"],
            "cpu_fb": c["forward_backward_pairs_per_s"], "cpu_fb_per_cpu_s": c["forward_backward_pairs_per_cpu_s"],
            "same_batch_forward_ratio": ratio(same and same["forward_pairs_per_s"], c["forward_pairs_per_s"]),
            "same_batch_fb_ratio": ratio(same and same["forward_backward_pairs_per_s"], c["forward_backward_pairs_per_s"]),
            "best_batch": top and top["batch_dialogues"],
            "best_forward_ratio": ratio(top and max(x["forward_pairs_per_s"] for x in gpu_rows), c["forward_pairs_per_s"]),
            "best_fb_ratio": ratio(top and top["forward_backward_pairs_per_s"], c["forward_backward_pairs_per_s"]),
        })
    e = (r.get("end_to_end") or [None])[0]
    if e and e.get("s_per_step_mean"):
        s1 = next(c for c in cpu["finetune"]["rows"] if c["target_samples_per_turn"] == 1)
        pairs = e["settings"]["batch_size"] * 6 * (1 + e["target_samples_per_turn"])  # 6 agent turns per See 2019 dialogue
        out["end_to_end_cpu_projected_s_per_step"] = round(pairs / s1["forward_backward_pairs_per_s"], 1)
        out["end_to_end_cpu_projected_note"] = (
            f"{pairs} pairs per step at the CPU's S=1 forward+backward rate (batch 4, one thread): a projection, not a measurement")
    return out


def render_end_to_end(runs: list[dict], c: dict) -> list[str]:
    e, st = runs[0], runs[0]["settings"]
    cols = [f"S = {x['target_samples_per_turn']}" for x in runs]
    lines = [
        "## 3. End to end: EnigmaEstimator, `encoder: finetune`, one held-out agent",
        "",
        f"Held out `{e['held_out']}` (the largest agent); experience {e['experience_dialogues']} dialogues; S target replies per "
        "agent turn, logged agent replies drawn at random from the store (as ope_speed.py). "
        f"DICE preset `{e['preset']}` with encoder finetune: batch {st['batch_size']} dialogues, {st['steps']} steps, "
        f"a diagnostic pass over all dialogues every {st['log_every']} steps (eval batch {st['eval_batch_size']}), "
        f"optimizer {st['optimizer']}, lr {st['lr']} (encoder x{st['lr_scale_encoder']}), schedule {st['schedule']} "
        f"(warm-up {st['warmup_steps']}), clip {st['clip_norm']}, heads hidden {st['head_hidden']}, tmax {st['tmax']}, "
        f"average_last {st['average_last']}, device {st['device']}; encode.finetune {e['encode_finetune']}. One estimator run per "
        "column, each with a freshly loaded encoder. Whether these settings estimate well is not measured here: time, and that "
        "the path runs on CUDA, are.",
        "",
        "| measure | " + " | ".join(cols) + " |",
        "|---|" + "---|" * len(runs),
    ]

    def row(label, fn):
        lines.append(f"| {label} | " + " | ".join(str(fn(x)) for x in runs) + " |")

    med = lambda x: round(statistics.median(x["diagnostic_pass_s"]), 2) if x["diagnostic_pass_s"] else ""  # noqa: E731
    row("status", lambda x: x["status"][:200])
    row("encoder load (once per study)", lambda x: f"{x['encoder_load_s']} s")
    row("prepare (tokenise + pack all dialogues)", lambda x: f"{x['prepare_s']} s")
    row("**seconds per optimiser step**, mean (median, p90)", lambda x: f"**{x['s_per_step_mean']}** ({x['s_per_step_median']}, {x['s_per_step_p90']})")
    row(f"mean s per step, per block of {st['log_every']} steps", lambda x: x["s_per_step_by_block"])
    row("of which building the padded batch and 2-D mask on the CPU (batch_tensors)", lambda x: f"{x['batch_tensors_s_per_step']} s")
    row("steps run; time in steps", lambda x: f"{x['steps_run']}; {x['step_time_total_s']} s")
    row("full-data diagnostic passes (the last gives the estimate) x median s", lambda x: f"{x['diagnostic_passes']} x {med(x)} s")
    row("**total train + estimate** (estimate_full)", lambda x: f"**{x['total_s']} s**")
    row("peak GPU memory", lambda x: f"{x['peak_gpu_gib']} GiB")
    row("ESS share", lambda x: x.get("ess_share", ""))
    row("E_D[zeta] overall", lambda x: x.get("zeta_mean", ""))
    row("E_D[zeta] per slot", lambda x: x.get("slot_zeta_mean", ""))
    row("estimates", lambda x: ", ".join(f"{k} {v}" for k, v in x.get("estimates", {}).items()))
    lines += ["", "Projection to a leave-one-agent-out study (" + e["projection"]["note"] + "):", "",
              "| | " + " | ".join(cols) + " |", "|---|" + "---|" * len(runs)]
    for n in e["projection"]["per_agent_s_at"]:
        row(f"one agent, {n} steps", lambda x, n=n: f"{x['projection']['per_agent_s_at'][n]} s")
    for k in e["projection"]["study_min"]:
        row(f"study: {k}", lambda x, k=k: f"{x['projection']['study_min'][k]} min")
    if "end_to_end_cpu_projected_s_per_step" in c:
        lines += ["", f"No end-to-end finetune run exists on the CPU. Projected from encoders_speed.md "
                      f"({c['end_to_end_cpu_projected_note']}): about {c['end_to_end_cpu_projected_s_per_step']} s per step "
                      f"against the GPU's {e['s_per_step_mean']} s measured at S = {e['target_samples_per_turn']} "
                      f"({ratio(c['end_to_end_cpu_projected_s_per_step'], e['s_per_step_mean'])}x)."]
    return lines


def render_md(r: dict) -> str:
    m, s, f, e, c = r["machine"], r["sentences"], r["finetune"], r.get("end_to_end"), r.get("cpu_comparison", {})
    lines = [
        "# GPU paths of the text encoders and the ENIGMA estimator (studies/encoders_gpu.py)",
        "",
        f"Device: **{m.get('gpu_name', 'CPU only')}** ({m.get('gpu_memory_gib')} GiB, {m.get('sm_count')} SMs, compute capability {m.get('capability')}), "
        f"driver {m.get('driver', '?')}; torch **{m['torch']}** (CUDA {m['torch_cuda']}), transformers {m['transformers']}, "
        f"Python {m['python']}; host {m['platform']}, {m['cpu_count']} CPU cores, torch threads {m['torch_threads']}. "
        f"Run {r['date']}.",
        f"Data: See 2019 (ConvAI2 human evaluation), {r['data']['dialogues']} dialogues, {r['data']['agent_turns']} agent turns, "
        f"{r['data']['unique_texts']} distinct utterances. Model: all-MiniLM-L6-v2 ({r['model_note']}).",
        "",
        "Reproduce (on a machine with a CUDA GPU, the project venv and the packaged MiniLM):",
        "",
        "    .venv/bin/python studies/encoders_gpu.py",
        "",
        "This run's exact command (on the lent GPU machine, where the weights package does not exist):",
        "",
        f"    {r['command']}",
        "",
        "## 1. Frozen MiniLM sentence encoding (building the embedding cache)",
        "",
        f"`EmbeddingCache.embed` on a cold cache over all {s['utterances']} distinct utterances (mean {s['mean_chars']} chars): "
        "tokenising, the bf16-autocast forward pass, mean pooling, and writing the shards; after a warm-up.",
        "",
        "| measure | GPU | CPU (encoders_speed.md) | GPU / CPU |",
        "|---|---|---|---|",
        f"| model load (tokenizer + weights, to the device) | {s['model_load_s']} s | {c.get('sentences', {}).get('model_load_cpu_s', '')} s | |",
    ]
    cs = c.get("sentences", {})
    for row in s["rows"]:
        rr = ratio(row["utterances_per_s"], cs.get("cpu_utt_per_s"))
        rc = ratio(row["utterances_per_s"], cs.get("cpu_utt_per_cpu_s"))
        lines.append(
            f"| cold-cache encoding, batch {row['batch_size']} ({row['seconds']} s for all; peak {row['peak_gpu_gib']} GiB) | "
            f"{row['utterances_per_s']} utt/s | {cs.get('cpu_utt_per_s', '')} utt/s wall, {cs.get('cpu_utt_per_cpu_s', '')} per CPU-s | "
            f"{rr}x wall, {rc}x per CPU-s |")
    best = max(s["rows"], key=lambda x: x["utterances_per_s"])
    lines += [
        f"| the whole See 2019 cache | {best['seconds']} s (batch {best['batch_size']}) | {cs.get('cache_build_cpu_projected_cpu_s', '')} CPU-s projected | |",
        "",
        f"Check of the GPU path: the bf16-autocast sentence vectors of {s['check_vs_cpu_float32']['vectors']} utterances against float32 "
        f"on the CPU: cosine min {s['check_vs_cpu_float32']['cosine_min']}, mean {s['check_vs_cpu_float32']['cosine_mean']}.",
        "",
        "## 2. Fine-tuned MiniLM, packed sequence (2-D mask), bf16 autocast",
        "",
        f"`FinetunePairEncoder` on {f['device']} ({f['autocast_dtype']} autocast, SDPA attention, max {f['max_utterance_tokens']} tokens "
        f"per utterance); model load {f['model_load_s']} s. Each row: {f['rows'][0]['batches_timed']} batches of distinct dialogues, "
        "best of the repeats, timed between `torch.cuda.synchronize()` calls after a warm-up pass over the same batches. Pairs count "
        "the logged and the target pairs; forward+backward is a scalar loss on both outputs and the backward pass into the encoder "
        "(no optimiser step). Peak memory is `torch.cuda.max_memory_allocated` over the row (forward and forward+backward).",
        "",
        "| S | batch (dialogues) | mean packed tokens | padded tokens per batch | forward pairs/s | forward+backward pairs/s | fwd+bwd s per batch | peak GPU memory |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in f["rows"]:
        lines.append(
            f"| {row['target_samples_per_turn']} | {row['batch_dialogues']} | {row['mean_packed_tokens']} | {row['padded_tokens_per_batch']} | "
            f"{row['forward_pairs_per_s']} | {row['forward_backward_pairs_per_s']} | {row['forward_backward_s_per_batch']} | {row['peak_gpu_gib']} GiB |")
    lines += ["", "Against the CPU rows of encoders_speed.md (batch 4 dialogues, one torch thread, shared 2-core machine):", "",
              "| S | CPU forward pairs/s (per CPU-s) | CPU fwd+bwd pairs/s (per CPU-s) | GPU/CPU forward, same batch | GPU/CPU fwd+bwd, same batch | GPU/CPU forward, best batch | GPU/CPU fwd+bwd, best batch (batch) |",
              "|---|---|---|---|---|---|---|"]
    for x in c.get("finetune", []):
        lines.append(
            f"| {x['target_samples_per_turn']} | {x['cpu_forward']} ({x['cpu_forward_per_cpu_s']}) | {x['cpu_fb']} ({x['cpu_fb_per_cpu_s']}) | "
            f"{x['same_batch_forward_ratio']}x | {x['same_batch_fb_ratio']}x | {x['best_forward_ratio']}x | {x['best_fb_ratio']}x ({x['best_batch']}) |")
    ch = f["check_vs_cpu_float32"]
    lines += [
        "",
        f"Check of the CUDA path: the pair vectors of {ch['dialogues']} dialogues (S = {ch['target_samples_per_turn']}) under bf16 autocast "
        f"against float32 on the CPU, same weights: logged pairs cosine min {ch['logged']['cosine_min']} (mean {ch['logged']['cosine_mean']}, "
        f"largest relative error {ch['logged']['relative_error_max']}); target pairs cosine min {ch['target']['cosine_min']} "
        f"(mean {ch['target']['cosine_mean']}, largest relative error {ch['target']['relative_error_max']}).",
        "",
    ]
    if e:
        lines += render_end_to_end(e, c)
    lines += ["", "Notes:", ""] + [f"- {n}" for n in r.get("notes", [])] + [""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA, help="the See 2019 folder (see2019_convai2_humaneval)")
    ap.add_argument("--model", default="minilm", help="packaged name or a local Hugging Face model directory")
    ap.add_argument("--quick", action="store_true", help="tiny smoke run; writes nothing unless --write")
    ap.add_argument("--write", action="store_true", help="write the results even on a CPU or with --quick")
    ap.add_argument("--out", type=Path, default=OUT, help="results path without suffix")
    ap.add_argument("--only", nargs="*", choices=("sentences", "finetune", "end_to_end"), default=None)
    ap.add_argument("--sentence-batch-sizes", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--ft-batch-sizes", type=int, nargs="+", default=[4, 16, 64])
    ap.add_argument("--ft-batches", type=int, default=8, help="distinct batches per finetune row")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--preset", default="paper", help="DICE preset of the end-to-end run")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--n-samples", type=int, nargs="+", default=[1, 5], help="S of the end-to-end runs (one run each)")
    ap.add_argument("--quick-dialogues", type=int, default=48)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's own)")
    ap.add_argument("--note", action="append", default=[], help="a line for the notes of the report")
    args = ap.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.sentence_batch_sizes = args.sentence_batch_sizes[:1]
        args.ft_batch_sizes = [b for b in args.ft_batch_sizes if b <= 4] or [4]
        args.ft_batches, args.repeat = 2, 1
        args.steps, args.batch_size, args.log_every = min(args.steps, 12), min(args.batch_size, 8), min(args.log_every, 5)
    torch.manual_seed(0)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    t0 = time.perf_counter()
    if cuda:
        torch.zeros(1, device="cuda")
        sync()
    cuda_init_s = time.perf_counter() - t0

    import transformers

    machine = {
        "platform": platform.platform(), "python": platform.python_version(), "cpu_count": os.cpu_count(),
        "torch": torch.__version__, "torch_cuda": torch.version.cuda, "transformers": transformers.__version__,
        "torch_threads": torch.get_num_threads(), "device": device, "cuda_init_s": round(cuda_init_s, 2),
    }
    if cuda:
        prop = torch.cuda.get_device_properties(0)
        machine.update(gpu_name=prop.name, gpu_memory_gib=round(prop.total_memory / 2**30, 1), sm_count=prop.multi_processor_count,
                       capability=f"{prop.major}.{prop.minor}", bf16=torch.cuda.is_bf16_supported())
        try:
            import subprocess

            machine["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                               capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception:
            pass
    print("machine", json.dumps(machine), flush=True)

    store = load_store(args.data)
    by_dialog = dialogues_by_id(store)
    all_ids = sorted(by_dialog)
    pool = [t.text for d in by_dialog.values() for t in d if t.role == "agent" and t.text.strip()]
    texts = list(dict.fromkeys(t.text for i in all_ids for t in by_dialog[i] if t.text.strip()))
    rng = random.Random(0)
    rng.shuffle(all_ids)
    results: dict = {
        "date": time.strftime("%Y-%m-%d"),
        "command": " ".join(shlex.quote(a) for a in [Path(sys.executable).name, "studies/encoders_gpu.py", *sys.argv[1:]]),
        "machine": machine,
        "data": {"dialogues": len(by_dialog), "agent_turns": sum(t.role == "agent" for d in by_dialog.values() for t in d),
                 "unique_texts": len(texts)},
        "model_note": str(args.model),
        "quick": args.quick,
    }
    if args.quick:
        texts = texts[:300]
    wanted = set(args.only or ("sentences", "finetune", "end_to_end"))
    write = (cuda and not args.quick) or args.write

    def save_partial() -> None:  # after each part, so that a run cut short keeps what it measured
        if write:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")

    if "sentences" in wanted:
        results["sentences"] = bench_sentences(args, texts, device)
        save_partial()
    if "finetune" in wanted:
        results["finetune"] = bench_finetune(args, by_dialog, all_ids, pool, device)
        save_partial()
    if "end_to_end" in wanted:
        results["end_to_end"] = []
        for n_samples in args.n_samples:
            results["end_to_end"].append(bench_end_to_end(args, store, n_samples))
            save_partial()
    if {"sentences", "finetune"} <= wanted:
        results["cpu_comparison"] = compare_cpu(results)
    results["notes"] = list(args.note)
    print("cpu_comparison", json.dumps(results.get("cpu_comparison", {})), flush=True)

    if not write:
        print("results not written (CPU or --quick; pass --write to write them)")
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    if {"sentences", "finetune"} <= wanted:
        args.out.with_suffix(".md").write_text(render_md(results))
    print(f"wrote {args.out.with_suffix('.json')} and .md", flush=True)


if __name__ == "__main__":
    main()
