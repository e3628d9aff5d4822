"""``enigma estimate``: ENIGMA estimates of one or more target agents from an experience store.

Each target is scored as a held-out agent of the benchmarks is (``evaluate_one``): the store
without the target's own rated dialogues (if it has any under that name) and without
``--exclude-agents``. Writes ``<out>/estimates.json`` (``{"targets": {name: {rating: {estimate,
unnormalised, ess, interval}}}, "converged": {name: true | false | null}, "diagnostics": {name: ...}}``)
and, per target, the runner's result file with its learning curve and trained heads beside it
(``<out>/results/<estimator>/<name>.json``, ``.curve.parquet``, ``.heads.pt``); a rerun with the
same data and settings reuses a finished target (so an interrupted run resumes).
``sampling_interval`` is the estimate's sampling interval ``[low, high]``
(``dice.interval_resamples`` resamples of the logged dialogues, each refitted:
``enigma.ope.bootstrap``), null where there is none: it covers the noise of the logs, not the
estimator's bias. With ``--calibration RESULTS_DIR`` (the store's own agents, each estimated
with itself held out: a benchmark's ``data/<B>/results`` or an earlier ``<out>/results``) each
estimate also gets its **calibrated interval** (``enigma.evaluation.calibration``, at
``report.confidence``), which covers the estimator's error as well. ``interval`` is the one
printed: the calibrated one where there is one, else the sampling one; ``interval_kind`` says
which and ``interval_how`` how it was made.

An estimate whose solver did not converge is written, flagged ``converged: false``, shown as NOT
CONVERGED with the reason, and the command exits 3: such a number is never reported silently. So
is a doubly robust value (``dice.value: dr``) read from weights whose slot masses are out of
balance (``dice.dr_slot_tol``): it divides by the slot-0 mass. A run that
diverges (zeta not finite, collapsed or exploded) and an agent that cannot be used exit 2 with
one line that says why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from enigma.cli.errors import USER_ERRORS, agent_exits, user_errors
from enigma.cli.options import PARAMS_HELP, check_out, load_params
from enigma.sampling.degenerate import DegenerateReplies

EXIT_NOT_CONVERGED = 3


def _register_errors() -> None:
    from enigma.agents.errors import AgentUnavailable
    from enigma.ope.guards import DiceDivergence
    from enigma.ope.padding import PaddingError
    from enigma.params import ParamsError
    from enigma.store.experience import StoreError

    for exc in (ParamsError, StoreError, PaddingError, DiceDivergence, AgentUnavailable):
        if exc not in USER_ERRORS:
            USER_ERRORS.append(exc)


def _pairs(values: list[str], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        name, sep, rest = v.partition("=")
        if not sep or not name or not rest:
            raise ValueError(f"{option} {v!r}: expected NAME=VALUE")
        if name in out:
            raise ValueError(f"{option}: target name {name!r} given twice")
        out[name] = rest
    return out


def run_estimate(
    experience: Path,
    targets: dict[str, str],
    target_actions: dict[str, str],
    exclude_agents: list[str],
    out: Path,
    params: Path | None,
    preset: str | None = None,
    encoder: str | None = None,
    n_samples: int | None = None,
    seed: int | None = None,
    cache_dir: Path | None = None,
    progress: bool = True,
    calibration: Path | None = None,
) -> dict:
    """Estimate every target with the ``enigma`` entry of params' estimators; ``n_samples``,
    ``seed`` and ``cache_dir`` override the ``sample`` section (``cache_dir`` holds ``samples/``
    and ``embeddings/``); ``params`` None: ./params.yaml where there is one, else the built-in
    defaults."""
    from enigma.agents.spec import parse_spec
    from enigma.params import ParamsError

    both = set(targets) & set(target_actions)
    if both:
        raise ValueError(f"target {sorted(both)[0]!r} given both as --target and --target-actions")
    if not targets and not target_actions:
        raise ValueError("no target: give --target NAME=SPEC or --target-actions NAME=FILE")
    # the options are checked before the estimators' imports (seconds) and any work
    for spec in targets.values():
        parse_spec(spec)
    p = load_params(params)
    check_out(out, "--out", folder=True)
    check_out(Path(cache_dir) if cache_dir else Path(p.sample.cache_dir), "--cache-dir" if cache_dir else "sample.cache_dir",
              folder=True)
    from enigma.evaluation.results import result_name_problem

    for option, names in (("--target", targets), ("--target-actions", target_actions)):
        for name in names:
            if problem := result_name_problem(out / "results", name):
                shown = name if len(name) <= 24 else f"{name[:24]}..."
                raise ValueError(f"{option} {shown}: {problem}; choose a shorter name")
    if calibration is not None and not Path(calibration).is_dir():
        raise FileNotFoundError(f"--calibration {calibration}: results directory not found (a benchmark's data/<B>/results "
                                "after its train stage, or the results/ folder of an earlier enigma estimate of the store's agents)")

    import pyarrow.parquet as pq

    from enigma.estimators import dice_config
    from enigma.evaluation.heldout import experience_without
    from enigma.ope import EnigmaEstimator
    from enigma.pipeline.score import score_agent
    from enigma.store.experience import ExperienceStore

    entry = p.estimators.get("enigma")
    if entry is None:
        raise ParamsError(f"{params or 'params.yaml'}: estimators has no entry 'enigma' (the estimator enigma estimate runs)")
    overrides = {k: v for k, v in (("preset", preset), ("encoder", encoder)) if v}
    if overrides:
        p = p.model_copy(update={"estimators": {**p.estimators, "enigma": entry.model_copy(update={"dice": {**entry.dice, **overrides}})}})
    cfg = dice_config("enigma", p)
    knowledge = cfg.frozen.knowledge if cfg.frozen is not None else None  # a block of the frozen encoder's only
    if knowledge is not None:
        from enigma.agents import unsourced_stand_in, unsourced_stand_in_table
        from enigma.encoders.config import STAND_IN_REFUSAL

        stand_ins = [f"--target {n}={spec}" for n, spec in sorted(targets.items()) if unsourced_stand_in(spec, p.sample.agents)]
        # a file of replies sampled before: its metadata names the agent that sampled them
        stand_ins += [f"--target-actions {n}={f} (sampled from {spec})" for n, f in sorted(target_actions.items())
                      if (spec := unsourced_stand_in_table(f))]
        if stand_ins:
            raise ParamsError(f"{params or 'params.yaml'}: dice.knowledge {knowledge!r} with {stand_ins[0]}: "
                              f"{STAND_IN_REFUSAL}; set dice.knowledge to null, or sample.agents.transcripts.sources: true "
                              "(a file of replies: sample it again with it)")
    if cfg.torch_threads:
        import torch

        torch.set_num_threads(cfg.torch_threads)
    store = ExperienceStore.open(experience)
    if not store.rating_names:
        raise ValueError(
            f"{experience}: the store has no ratings, so there is nothing to estimate (ENIGMA estimates each rating "
            "of the logged dialogues; ingest them with their scales, e.g. --scale overall=1:5)"
        )
    from enigma.store.schema import RATING_PREFIX

    n = store.dialogues.num_rows
    rated = {r: n - store.dialogues.column(RATING_PREFIX + r).null_count for r in store.rating_names}
    if not any(rated.values()):  # scales given at ingest, but no line carried the rating
        counts = ", ".join(f"{r}: {k} of {n} rated" for r, k in rated.items())
        raise ValueError(f"{experience}: no dialogue has a rating ({counts}), so there is nothing to estimate; "
                         "ingest the ratings with the dialogues")
    if calibration is not None:
        _check_calibration_store(Path(calibration), store, experience)
    excluded = set(exclude_agents)
    unknown = excluded - set(store.agents())
    if unknown:
        raise ValueError(f"--exclude-agents: {sorted(unknown)} not agents of {experience} (have {store.agents()})")
    overrides = {"n_samples": n_samples, "seed": seed, "cache_dir": str(cache_dir / "samples") if cache_dir else None}
    sample_cfg = p.sample.model_copy(update={k: v for k, v in overrides.items() if v is not None})
    # Embeddings live where the encode stage keeps them, so a study re-encodes nothing.
    embed_dir = cache_dir / "embeddings" if cache_dir else None
    estimator = EnigmaEstimator(cfg, cache_dir=embed_dir, encode=p.encode, progress=progress)
    results: dict[str, dict] = {}
    for name in list(targets) + list(target_actions):
        # The strict protocol: a target's own rated dialogues never inform its estimate.
        drop = sorted(excluded | ({name} & set(store.agents())))
        if name in targets:
            from enigma.sampling.sampler import sample_targets

            exp = experience_without(store, name, sorted(excluded), require_in_store=False)
            with agent_exits(targets[name]):
                table = sample_targets(exp, targets[name], progress=progress, **sample_cfg.run_options())
        else:
            path = Path(target_actions[name])
            if not path.is_file():
                raise FileNotFoundError(f"--target-actions {name}={path}: file not found")
            try:
                table = pq.read_table(path)
            except Exception as exc:  # pyarrow raises several types for corrupt files
                raise ValueError(f"--target-actions {name}={path}: not a readable Parquet file ({exc})") from exc
        score = score_agent(store, estimator, name, table, out / "results", exclude=sorted(excluded))
        results[name] = {
            "estimates": {r: {"estimate": score["estimates"][r], "unnormalised": (score["unnormalised"] or {}).get(r),
                              "ess": (score["ess"] or {}).get(r), "interval": score["intervals"].get(r)}
                          for r in score["estimates"]},
            "converged": converged(score["diagnostics"], list(score["estimates"])),
            "diagnostics": dict(score["diagnostics"], excluded_agents=drop),
            "degenerate": score["degenerate"],
        }
    for name, r in results.items():
        for rating, e in r["estimates"].items():
            e["sampling_interval"] = e.pop("interval")
            e.update(interval=e["sampling_interval"], interval_kind="sampling" if e["sampling_interval"] else "none",
                     interval_how="the dialogue bootstrap: the noise of the logs, not the estimator's bias")
    if calibration is not None:
        _calibrate(results, store, Path(calibration), p.report.confidence)
    summary = {
        "targets": {n: r["estimates"] for n, r in results.items()},
        "converged": {n: r["converged"] for n, r in results.items()},
        "diagnostics": {n: r["diagnostics"] for n, r in results.items()},
        "degenerate": {n: r["degenerate"] for n, r in results.items()},
    }
    from enigma.writes import naming, write_text

    with naming(out):
        out.mkdir(parents=True, exist_ok=True)
    write_text(out / "estimates.json", json.dumps(_nan_to_null(summary), indent=2, allow_nan=False) + "\n")
    return summary


def _check_calibration_store(calibration: Path, store, experience: Path) -> None:
    """The calibration results must be of this store: each agent's result was made on the store
    without that agent, whose digest it records (results of another store, such as another seed
    of the simulator with the same agents, were used silently). A result that records none is a
    warning: it cannot be checked."""
    from enigma.evaluation.fingerprints import store_fingerprint
    from enigma.evaluation.results import result_path, saved_experience_digest

    unchecked, other = [], None
    for agent in store.agents():
        path = result_path(calibration, "enigma", agent)
        if not path.is_file():
            continue
        recorded = saved_experience_digest(path)
        if recorded is None:
            unchecked.append(agent)
            continue
        mine = store_fingerprint(store.filter_agents(drop={agent}))
        if recorded != mine and other is None:
            other = (f"--calibration {calibration}: its results were made on another store than {experience} "
                     f"(agent {agent}: its result's experience has digest {recorded}, this store without {agent} "
                     f"has {mine}); calibrate on this store's own results (its benchmark's data/<B>/results, or "
                     "an enigma estimate of its agents on it)")
    if unchecked:
        typer.echo(f"warning: --calibration {calibration}: {len(unchecked)} result(s) ({', '.join(unchecked[:3])}"
                   f"{', ...' if len(unchecked) > 3 else ''}) record no digest of the store they were made on, so they "
                   f"cannot be checked to be of {experience}", err=True)
    if other:
        raise ValueError(other)


def _calibrate(results: dict, store, calibration: Path, level: float) -> None:
    """Give every estimate its calibrated interval, calibrated on the store's agents in
    ``calibration`` (their leave-one-agent-out ENIGMA estimates against their mean ratings in the
    store) other than the target itself; the same code as the nightly job's (``pipeline.compare``)."""
    from enigma.evaluation import calibration as calib
    from enigma.pipeline.compare import calibration_residuals

    sets = {r: calibration_residuals(calibration, "enigma", store, r) for r in store.rating_names}
    if not any(c["estimates"] for c in sets.values()):
        raise ValueError(f"--calibration {calibration}: no enigma estimates of the store's agents "
                         f"({', '.join(store.agents()[:5])}{', ...' if len(store.agents()) > 5 else ''}) to calibrate on")
    for name, r in results.items():
        for rating, e in r["estimates"].items():
            c = sets.get(rating)
            if not c or not c["estimates"] or e["estimate"] is None:
                continue
            cal = calib.fit_without(c["estimates"], c["truths"], [name])
            lo, hi, how = calib.interval(cal, e["estimate"], level)
            e["calibrated_estimate"] = cal.calibrated(e["estimate"]) if cal.n else None
            if lo is not None:
                e.update(interval=[lo, hi], interval_kind="calibrated", interval_level=level,
                         interval_how=f"{how}, from {calibration}")


def converged(diagnostics: dict, ratings: list[str]) -> bool | None:
    """Whether every DICE run of a result (``all``, or one per rating) met its solver's
    convergence criterion (False if one did not); None where the solver has none (gradient
    descent-ascent without a stopping rule)."""
    flags = [diagnostics[k].get("converged") for k in ["all", *ratings] if isinstance(diagnostics.get(k), dict)]
    if any(f is False for f in flags):
        return False
    return True if flags and all(f is True for f in flags) else None


def _shown(rating: str, e: dict) -> str:
    """``reward=0.8123 [0.70, 0.91] (calibrated 0.80: conformal over 26 agents; ess 492)``: the
    estimate, its interval where there is one, named, so that a sampling-only interval is never
    read as how sure the number is."""
    value = "n/a" if e["estimate"] is None else f"{e['estimate']:.4f}"
    interval = f" [{e['interval'][0]:.3f}, {e['interval'][1]:.3f}]" if e.get("interval") else ""
    notes = []
    if e.get("interval_kind") == "calibrated":
        notes.append(f"calibrated {e['calibrated_estimate']:.3f}: {e['interval_how'].split(', from ')[0]}")
    elif e.get("interval_kind") == "sampling":
        notes.append("sampling only, not the estimator's bias")
    if e.get("ess") is not None:
        notes.append(f"ess {e['ess']:.0f}")
    return f"{rating}={value}{interval}" + (f" ({'; '.join(notes)})" if notes else "")


def _why_not(diagnostics: dict) -> str:
    runs = [d for d in diagnostics.values() if isinstance(d, dict) and d.get("converged") is False]
    d = runs[0] if runs else {}
    if d.get("why"):
        return d["why"]
    return (f"{d.get('iterations')} iterations, max |gradient| {d.get('grad_max', float('nan')):.2g}, "
            f"max |E_D[zeta|slot] - 1| {d.get('mass_gap_max', float('nan')):.2g}")


def _nan_to_null(obj):
    if isinstance(obj, float) and obj != obj:
        return None
    if isinstance(obj, dict):
        return {k: _nan_to_null(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_nan_to_null(v) for v in obj]
    return obj


def register(app: typer.Typer) -> None:
    @app.command("estimate")
    @user_errors
    def estimate(
        experience: Path = typer.Option(..., "--experience", "-e", help="experience store directory"),
        target: List[str] = typer.Option([], "--target", "-t", help="NAME=AGENT_SPEC (repeatable); replies sampled"),
        target_actions: List[str] = typer.Option([], "--target-actions", help="NAME=PARQUET of sampled replies (repeatable)"),
        exclude_agents: str = typer.Option("", "--exclude-agents", help="comma-separated agents left out of the experience"),
        out: Path = typer.Option(..., "--out", "-o", help="output directory"),
        params: Optional[Path] = typer.Option(None, "--params", help=f"{PARAMS_HELP} (estimators.enigma.dice, sample, encode)"),
        preset: Optional[str] = typer.Option(None, help="DICE preset (params: estimators.enigma.dice.preset): exact_nu, default (gradient descent-ascent), paper, dualdice, gendice, bestdice"),
        encoder: Optional[str] = typer.Option(None, help="onehot, frozen or finetune (params: estimators.enigma.dice.encoder)"),
        n_samples: Optional[int] = typer.Option(None, "--n-samples", "-n", help="target replies per logged state (params: sample.n_samples)"),
        seed: Optional[int] = typer.Option(None, help="sampling seed (params: sample.seed)"),
        cache_dir: Optional[Path] = typer.Option(None, help="cache folder (embeddings, samples)"),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="show progress bars"),
        calibration: Optional[Path] = typer.Option(
            None, "--calibration",
            help="results folder of the store's own agents each estimated with itself held out (data/<B>/results, or an "
                 "earlier --out's results/): each estimate gets its calibrated interval, which covers the estimator's error"),
        quiet: bool = typer.Option(False, "--quiet", "-q", hidden=True, help="the same as --no-progress"),
    ) -> None:
        """Estimate target agents' ratings with ENIGMA (DICE on the other agents' logs)."""
        _register_errors()
        summary = run_estimate(
            experience, _pairs(target, "--target"), _pairs(target_actions, "--target-actions"),
            [a for a in exclude_agents.split(",") if a.strip()], out, params, preset, encoder,
            n_samples, seed, cache_dir, progress=progress and not quiet, calibration=calibration,
        )
        for name, ests in summary["targets"].items():
            verdict = {False: "  NOT CONVERGED: " + _why_not(summary["diagnostics"][name]), None: ""}.get(summary["converged"][name], "")
            typer.echo(name + ": " + ", ".join(_shown(r, e) for r, e in ests.items()) + verdict)
            bad = summary["degenerate"].get(name)
            if bad and (sentence := DegenerateReplies.from_dict(bad).sentence()):
                typer.echo(f"note: {name}: " + sentence)
        typer.echo(f"wrote {out / 'estimates.json'}")
        stuck = [n for n, c in summary["converged"].items() if c is False]
        if stuck:
            typer.echo(f"error: the solver did not converge for {', '.join(stuck)}: those estimates are flagged "
                       "converged: false in estimates.json and are not to be trusted", err=True)
            raise typer.Exit(EXIT_NOT_CONVERGED)
