"""``enigma stage <stage> <benchmark>``: one pipeline stage of one benchmark of params.yaml, as
dvc.yaml runs it (``enigma.pipeline``)."""

from __future__ import annotations

from pathlib import Path

import typer

from enigma.cli.errors import USER_ERRORS, user_errors

STAGES = ("store", "rollouts", "sample", "train", "report", "track")
# the stages of an entry of checkpoint_benchmarks (enigma.pipeline.checkpoints)
CHECKPOINT_STAGES = ("checkpoints", "checkpoint-truth", "checkpoint-scores", "checkpoint-report")


def _register_errors() -> None:
    from enigma.evaluation.errors import EvaluationError
    from enigma.params import ParamsError
    from enigma.store.experience import StoreError

    for exc in (ParamsError, StoreError, EvaluationError):
        if exc not in USER_ERRORS:
            USER_ERRORS.append(exc)


def stage_command(
    stage: str = typer.Argument(..., metavar="STAGE", help="store, rollouts, sample, train, report or track; or, for "
                                "an entry of checkpoint_benchmarks, checkpoints, checkpoint-truth, checkpoint-scores "
                                "or checkpoint-report"),
    benchmark: str = typer.Argument(..., help="an entry of benchmarks (or checkpoint_benchmarks) in params.yaml"),
    full: bool = typer.Option(False, "--full", help="train/report/track: the benchmark's full_estimators (report: beside the main run's)"),
    track: bool = typer.Option(True, "--track/--no-track", help="report: also log the run to MLflow (section tracking)"),
    params: Path = typer.Option(Path("params.yaml"), "--params", help="parameters file"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="show progress bars"),
) -> None:
    """Run one stage of a benchmark: store (simulate or ingest, and the truth), rollouts, sample,
    train, report (and track), as `dvc repro` does."""
    _register_errors()
    from enigma.params import Params

    if stage not in STAGES + CHECKPOINT_STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {', '.join(STAGES + CHECKPOINT_STAGES)}")
    p = Params.load(params)
    if stage in CHECKPOINT_STAGES:
        return _checkpoint_stage(stage, p.checkpoint_benchmark(benchmark), p, progress)
    b = p.benchmark(benchmark)
    if stage == "store":
        from enigma.pipeline.store import build_store

        out = build_store(b, p, progress)
        typer.echo(f"{benchmark}: store {b.store}, truth {b.truth} ({out.get('n_dialogues', 0):,} dialogues)")
    elif stage == "rollouts":
        from enigma.pipeline.rollouts import rollouts

        out = rollouts(b, p, progress)
        typer.echo(f"{benchmark}: {out['dialogues']} rollouts -> {b.data_dir / 'rollouts'}")
    elif stage == "sample":
        from enigma.pipeline.sample import sample

        out = sample(b, p, progress)
        if out["left_out"]:
            typer.echo(f"experience only (not held out: no rollouts to act them): {', '.join(out['left_out'])}")
        typer.echo(f"{benchmark}: target actions of {len(out['agents'])} agent(s) -> {b.targets_dir}")
    elif stage == "train":
        from enigma.pipeline.train import train

        train(b, p, full=full, progress=progress, say=typer.echo)
    else:
        from enigma.pipeline.report import report, track as track_run

        summary = report(b, p, full=full, progress=progress) if stage == "report" else _read_summary(b, full)
        if stage == "report":
            typer.echo(f"report: {summary['report_html']}")
        if stage == "track" or track:
            tracked = track_run(b, p, summary, full=full)
            if tracked:
                typer.echo(f"MLflow: parent run {tracked['parent_run_id']} ({len(tracked['children'])} child runs)"
                           + (f", registered {tracked['registered']}" if tracked.get("registered") else ""))


def _checkpoint_stage(stage: str, c, p, progress: bool) -> None:
    from enigma.pipeline import checkpoints as stages

    if stage == "checkpoints":
        out = stages.build(c, p, say=typer.echo)
        typer.echo(f"{c.name}: {len(out['checkpoints'])} checkpoints -> {c.checkpoints}")
    elif stage == "checkpoint-truth":
        stages.truth(c, p, say=typer.echo)
        typer.echo(f"{c.name}: truth {c.truth}, dialogues {c.dialogues}")
    elif stage == "checkpoint-scores":
        out = stages.scores(c, p, progress=progress, say=typer.echo)
        if out["failed"]:
            typer.echo(f"{out['failed']} score(s) failed; the report leaves them out; the next run retries them")
    else:
        typer.echo(f"report: {stages.report(c, p)['report_html']}")


def _read_summary(b, full: bool) -> dict:
    from enigma.evaluation.summary_file import read_summary

    return read_summary(b.report_dir(full) / "summary.json")


def register(app: typer.Typer) -> None:
    app.command("stage")(user_errors(stage_command))
