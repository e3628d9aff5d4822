"""The stages of a checkpoint benchmark (``checkpoint_benchmarks`` in params.yaml): the language
model's checkpoints, their truth, their scores as the nightly job makes them, and the report.

- ``checkpoints``: the tokenizer and the model trained on the ``scored_on`` benchmark's store,
  one ``hf:`` folder per checkpoint (``enigma.lm``).
- ``truth``: each checkpoint plays the simulator's customer on-policy, to the standard-error rule
  of the ``simulate`` section (as the sellers' truth), batched; a few of its rated dialogues are
  kept in a store to read.
- ``scores``: each checkpoint's replies at every logged agent turn of the ``scored_on`` store
  (sampled and cached as ``enigma sample`` does), and every estimator on them with the whole store
  as experience: the nightly job's scoring path (``enigma.pipeline.score``), result files reused
  while their inputs are unchanged.
- ``report``: see ``enigma.evaluation.checkpoints``.

Generation and scoring run in ``pipeline.max_workers`` processes and training in one per data mix,
each process on the entry's ``threads`` torch threads: on 2 cores two processes of one thread
generate 1.3 to 1.6 times as fast as one of two (studies/results/lm_generation_processes.md), and
the bits depend on the thread count alone, not on how many processes share the work.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from enigma.params import Params
from enigma.pipeline.config import CheckpointBenchmark


def each(workers: int, fn: Callable, jobs: list[tuple]) -> Iterator[tuple[tuple, Any]]:
    """``(job, fn(*job))`` for every job as it finishes: in ``workers`` spawned processes, or in
    this one when there is one worker or one job. A job that raises stops the rest (those not yet
    started are cancelled); the finished ones have been yielded, so a caller saves them first."""
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield job, fn(*job)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from enigma.pipeline.workers import init_worker

    # spawn: a forked child would inherit torch's thread pool state from the parent
    with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=multiprocessing.get_context("spawn"),
                             initializer=init_worker) as pool:
        futures = {pool.submit(fn, *job): job for job in jobs}
        try:
            for f in as_completed(futures):
                yield futures[f], f.result()
        finally:
            for f in futures:
                f.cancel()


def build(c: CheckpointBenchmark, params: Params, say: Callable[[str], None] = print) -> dict[str, Any]:
    return build_checkpoints(c.scored_on.store, c.checkpoints, c.record, c.config.lm, c.config.threads,
                             params.pipeline.max_workers, say)


def build_checkpoints(store_dir: str | Path, out: str | Path, record_file: str | Path, cfg, threads: int = 1,
                      workers: int = 1, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Every checkpoint of ``cfg`` (an ``LMConfig``) into ``out/<mix>-step<N>/`` (``out`` is a
    registry folder of the nightly job) and its record (JSON: mixes, steps, training losses and
    sizes) into ``record_file``. The tokenizer is trained here once; then every mix not yet saved
    trains in a process of its own (``workers`` > 1; else one after another here) on ``threads``
    torch threads, and the record is rewritten as each mix finishes, so an interrupted build
    retrains only the mixes it had not finished."""
    from enigma.lm.tokenizer import train_tokenizer
    from enigma.lm.train import mixes_to_train, train_run
    from enigma.store.experience import ExperienceStore
    from enigma.writes import write_text

    out, record_file = Path(out), Path(record_file)
    out.mkdir(parents=True, exist_ok=True)
    record = json.loads(record_file.read_text()) if record_file.is_file() else {}
    todo = mixes_to_train(out, record, cfg)
    for k, name in enumerate(cfg.mixes):
        if k not in todo:
            say(f"{name}: {len(cfg.save_at)} checkpoints already saved")
    if todo:
        store = ExperienceStore.open(store_dir)
        tokenizer = train_tokenizer(store.turns.column("text").to_pylist(), cfg.vocab_size)
        # A mix is one run that cannot be split: in a pool of 2 on 2 cores, the third of 3 mixes
        # trains alone with a core idle. So every mix gets a process of its own and they share the
        # cores; the bits depend on ``threads`` only.
        side_by_side = len(todo) if workers > 1 else 1
        for _, entries in each(side_by_side, train_run, [(store_dir, out, tokenizer, cfg, k, threads) for k in todo]):
            record.update(entries)
            write_text(record_file, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return {"checkpoints": cfg.checkpoint_names(), "out": str(out)}


def checkpoint_dir(c: CheckpointBenchmark, name: str) -> Path:
    d = c.checkpoints / name
    if not (d / "config.json").is_file():
        raise FileNotFoundError(f"{d}: checkpoint {name} missing (run the checkpoints stage first)")
    return d


def simulate_config(c: CheckpointBenchmark, params: Params):
    """The ``scored_on`` benchmark's simulator settings: the checkpoints meet its customers."""
    return params.with_overrides("simulate", **(c.scored_on.config.source.simulate or {}))


def truth_of(c: CheckpointBenchmark, params: Params, name: str) -> str:
    """One checkpoint's truth and rated dialogues, on the entry's ``threads`` torch threads, into
    ``dialogues/.partial/<name>.json``; returns the line to print."""
    import torch

    from enigma.agents.hf import HFAgent
    from enigma.sim.generate import rollout_rows, true_values
    from enigma.sim.rng import mix
    from enigma.writes import write_text

    torch.set_num_threads(c.config.threads)
    t0 = time.perf_counter()
    cfg = simulate_config(c, params)
    agent = HFAgent(checkpoint_dir(c, name), params.sample.agents.hf)
    seeds = [mix(cfg.seed, "experience", name, i) for i in range(c.config.dialogues_per_agent)]
    dialogues, turns = rollout_rows(agent, name, seeds, cfg)
    got = {"dialogues": dialogues, "turns": turns, "truth": true_values(name, cfg, agent)}
    write_text(c.dialogues / ".partial" / f"{name}.json", json.dumps(got))
    reward = next(t for t in got["truth"] if t["rating"] == "reward")
    return (f"{name}: reward {reward['value']:.3f} ± {reward['stderr']:.3f} ({reward['n']} dialogues, "
            f"{time.perf_counter() - t0:.0f}s)")


def truth(c: CheckpointBenchmark, params: Params, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Every checkpoint's true values (``truth.parquet``, as the simulator's) and its first
    ``dialogues_per_agent`` rated dialogues (``dialogues``, a store). Checkpoints done are kept
    under ``dialogues/.partial`` until all are, so an interrupted stage resumes."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from enigma.sim.generate import TRUTH_SCHEMA
    from enigma.sim.scoring import RATINGS
    from enigma.store import schema as S
    from enigma.store.experience import ExperienceStore

    partial = c.dialogues / ".partial"
    partial.mkdir(parents=True, exist_ok=True)
    names = c.checkpoint_names()
    todo = [(c, params, n) for n in names if not (partial / f"{n}.json").is_file()]
    for _, line in each(params.pipeline.max_workers, truth_of, todo):
        say(line)
    done = {n: json.loads((partial / f"{n}.json").read_text()) for n in names}
    table = pa.Table.from_pylist([t for n in names for t in done[n]["truth"]], schema=TRUTH_SCHEMA)
    c.truth.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, c.truth)
    store = ExperienceStore(
        pa.Table.from_pylist([d for n in names for d in done[n]["dialogues"]], schema=S.dialogues_schema(list(RATINGS))),
        pa.Table.from_pylist([t for n in names for t in done[n]["turns"]], schema=S.TURNS_SCHEMA), None)
    cfg = simulate_config(c, params)
    store.write(c.dialogues, manifest={"source": "airline-sim", "checkpoints": str(c.checkpoints),
                                       "simulate": cfg.settings(), "max_agent_turns": cfg.max_agent_turns})
    shutil.rmtree(partial, ignore_errors=True)
    return {"truth": str(c.truth), "dialogues": str(c.dialogues), "checkpoints": len(names)}


def check_estimators(c: CheckpointBenchmark, params: Params) -> None:
    """Every estimator of the entry can score a new agent (one error before any work)."""
    from enigma.contracts import Regime
    from enigma.estimators import build_estimator

    for name in c.config.estimators:
        est = build_estimator(name, params, knowledge=c.scored_on.config.knowledge)
        if set(est.regimes) - {Regime.NONE, Regime.REPLIES_AT_LOGGED_STATES}:
            raise ValueError(f"checkpoint_benchmarks.{c.name}: {name} needs {sorted(r.value for r in est.regimes)}; "
                             "a new checkpoint is scored from its replies at the logged states only")


def targets_path(c: CheckpointBenchmark, name: str) -> Path:
    return c.targets_dir / f"{name}.parquet"


def _score_share(c: CheckpointBenchmark, params: Params, jobs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Some (checkpoint, estimator) scores, in a worker process (one torch thread)."""
    import pyarrow.parquet as pq

    from enigma.estimators import build_estimator
    from enigma.pipeline.score import score_agent
    from enigma.store.experience import ExperienceStore

    store = ExperienceStore.open(c.scored_on.store)
    out = []
    for name, estimator in jobs:
        t0 = time.perf_counter()
        est = build_estimator(estimator, params, knowledge=c.scored_on.config.knowledge)
        try:
            got = score_agent(store, est, name, pq.read_table(targets_path(c, name)), c.results_dir,
                              labels={"spec": f"hf:{c.checkpoints / name}"})
            out.append({"checkpoint": name, "estimator": estimator, "estimates": got["estimates"],
                        "seconds": round(time.perf_counter() - t0, 1), "error": None})
        except Exception as exc:  # one failed score is reported and retried next run; the others go on
            out.append({"checkpoint": name, "estimator": estimator, "estimates": None, "seconds": None,
                        "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
    return out


def sample_of(c: CheckpointBenchmark, params: Params, name: str, progress: bool = False) -> str:
    """One checkpoint's replies at every logged agent turn of the ``scored_on`` store, on the
    entry's ``threads`` torch threads (``targets/<name>.parquet``); returns the line to print."""
    import torch

    from enigma.pipeline.sample import sample_spec

    torch.set_num_threads(c.config.threads)
    t0 = time.perf_counter()
    sample_spec(c.scored_on.store, f"hf:{checkpoint_dir(c, name)}", targets_path(c, name), params.sample,
                progress=progress)
    return f"{name}: replies at the logged states ({time.perf_counter() - t0:.0f}s)"


def scores(c: CheckpointBenchmark, params: Params, progress: bool = False,
           say: Callable[[str], None] = print) -> dict[str, Any]:
    """Every checkpoint sampled at the ``scored_on`` store's logged agent turns (the sampler's
    cache keeps what an interrupted run drew), then scored by every estimator; both in
    ``pipeline.max_workers`` processes. Returns the failures."""
    check_estimators(c, params)
    names = c.checkpoint_names()
    workers = params.pipeline.max_workers
    # a progress bar per process would interleave; the finished checkpoints are printed instead
    for _, line in each(workers, sample_of, [(c, params, n, progress and workers <= 1) for n in names]):
        say(line)
    c.results_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(n, e) for e in c.config.estimators for n in names]
    t0 = time.perf_counter()
    if workers <= 1:
        import torch

        torch.set_num_threads(1)
    shares = [(c, params, jobs[i::workers]) for i in range(max(1, workers))]
    done = [r for _, got in each(workers, _score_share, shares) for r in got]
    failed = [r for r in done if r["error"]]
    for r in failed:
        say(f"{r['estimator']} / {r['checkpoint']}: FAILED ({r['error']})")
    say(f"{c.name}: {len(jobs)} scores in {time.perf_counter() - t0:.0f}s -> {c.results_dir}")
    return {"scores": len(jobs), "failed": len(failed)}


def replies_of(c: CheckpointBenchmark) -> dict[str, dict[str, Any]]:
    """Per checkpoint: its sample's degenerate and cut replies (``enigma.pipeline.score.degenerate``),
    and how many of its kept on-policy dialogues it never ended with an action, by the simulator's
    reading of an agent turn (``enigma.sim.language.read_action``; this benchmark's rule, not the
    estimator's)."""
    import pyarrow.parquet as pq

    from enigma.pipeline.score import degenerate
    from enigma.sim.language import read_action
    from enigma.store.experience import ExperienceStore

    store = ExperienceStore.open(c.dialogues)
    agent_of = dict(zip(store.dialogues.column("dialog_id").to_pylist(), store.dialogues.column("agent_id").to_pylist()))
    acted: dict[str, bool] = dict.fromkeys(agent_of, False)
    turns = store.turns
    for did, role, text in zip(*(turns.column(k).to_pylist() for k in ("dialog_id", "role", "text"))):
        if role == "agent" and not acted[did] and read_action(text) is not None:
            acted[did] = True
    out = {}
    for name in c.checkpoint_names():
        own = [d for d, a in agent_of.items() if a == name]
        out[name] = {"degenerate": degenerate(pq.read_table(targets_path(c, name))),
                     "kept_dialogues": len(own), "no_action": sum(not acted[d] for d in own)}
    return out


def report(c: CheckpointBenchmark, params: Params) -> dict[str, Any]:
    """``<report.out_dir>/<name>/``: summary.json, index.md and index.html (``enigma.evaluation.checkpoints``)."""
    from enigma.estimators import build_estimator
    from enigma.evaluation.checkpoints import build_summary, write_report
    from enigma.store.experience import ExperienceStore

    record = json.loads(c.record.read_text())
    filed = {n: build_estimator(n, params, knowledge=c.scored_on.config.knowledge).name for n in c.config.estimators}
    summary = build_summary(c.truth, c.results_dir, c.scored_on.results_dir(), ExperienceStore.open(c.scored_on.store),
                            filed, record, params.nightly.interval_level, c.config.note, c.scored_on.name,
                            replies_of(c))
    page = write_report(summary, c.report_dir, f"{c.name}: learned checkpoints scored as the nightly job scores them")
    return {"report_html": str(page), "summary": summary}
