"""``enigma ingest <format> <path> --out <dir>`` and ``enigma data summary <dir>``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from enigma.cli.errors import USER_ERRORS, user_errors
from enigma.cli.options import PARAMS_HELP, check_out, load_params

data_app = typer.Typer(help="Inspect experience stores.", no_args_is_help=True)

FORMATS_HELP = "see2019, see2019-selfplay, fed, jsonl or parquet"


def _register_errors() -> None:
    from enigma.params import ParamsError
    from enigma.store.experience import StoreError

    for exc in (StoreError, ParamsError):
        if exc not in USER_ERRORS:
            USER_ERRORS.append(exc)


def _fmt(v) -> str:
    return "   -  " if v is None else f"{v:6.3f}"


def ingest_command(
    fmt: str = typer.Argument(..., metavar="FORMAT", help=FORMATS_HELP),
    path: Path = typer.Argument(..., help="input file or directory"),
    out: Path = typer.Option(..., "--out", "-o", help="store directory to write (replaced whole)"),
    scale: Optional[list[str]] = typer.Option(
        None, "--scale", help="rating scale NAME=MIN:MAX (min-max to [0,1]) or NAME=MIN:MAX/DIVISOR; repeatable"),
    params: Optional[Path] = typer.Option(
        None, "--params", help=f"{PARAMS_HELP} (section 'ingest')"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="show progress bars"),
) -> None:
    """Read FORMAT input at PATH, validate it with Great Expectations and write the store."""
    _register_errors()
    from enigma.store.config import parse_scale_options
    from enigma.store.ingest import ingest
    from enigma.store import queries

    config = load_params(params).ingest
    check_out(out, "--out", folder=True)
    scales = parse_scale_options(scale or [])
    result = ingest(fmt, path, out, config, scales, progress=progress)
    r = result.read
    n_agents = len(set(r.dialogues.column("agent_id").to_pylist()))
    typer.echo(f"wrote {result.out}: {r.dialogues.num_rows:,} dialogues, {n_agents} agents, "
               f"{r.turns.num_rows:,} turns, {r.n_rejects:,} rejects (from {r.n_records:,} records)")
    if r.n_rejects:
        typer.echo("rejects by reason (all rows in rejects.parquet):")
        for row in queries.rejects_by_reason(result.out, limit=10).to_pylist():
            typer.echo(f"  {row['n']:6,}  [{row['field'] or '-'}] {row['reason']}")
    for w in result.report.warnings:
        typer.echo(f"warning: {w.summary()}")
    typer.echo(f"validation: passed {len(result.report.checks)} expectations "
               f"({len(result.report.warnings)} warnings); report {result.out / 'validation.md'}")


@data_app.command("summary")
@user_errors
def summary(store: Path = typer.Argument(..., help="experience store directory")) -> None:
    """Per-agent dialogue counts and mean normalised ratings (DuckDB over the Parquet files)."""
    _register_errors()
    from enigma.store import queries

    table = queries.agent_summary(store)
    counts = queries.store_counts(store)
    typer.echo(f"{store}: {counts['dialogues']:,} dialogues, {counts['agents']} agents, "
               f"{counts['turns']:,} turns, {counts['rejects']:,} rejects")
    means = [c for c in table.column_names if c.startswith("mean_")]
    width = max([len("agent")] + [len(a) for a in table.column("agent_id").to_pylist()])
    header = f"{'agent':<{width}}  {'n':>5}  " + " ".join(f"{c[5:][:6]:>6}" for c in means)
    typer.echo(header)
    for row in table.to_pylist():
        typer.echo(f"{row['agent_id']:<{width}}  {row['n_dialogues']:>5}  " + " ".join(_fmt(row[c]) for c in means))
    if counts["rejects"]:
        typer.echo("rejects by reason:")
        for row in queries.rejects_by_reason(store, limit=10).to_pylist():
            typer.echo(f"  {row['n']:6,}  [{row['field'] or '-'}] {row['reason']}")


def register(app: typer.Typer) -> None:
    app.command("ingest")(user_errors(ingest_command))
    app.add_typer(data_app, name="data")
