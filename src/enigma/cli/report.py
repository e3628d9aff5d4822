"""``enigma report``: build a leave-one-agent-out report, or show one's headline numbers."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from enigma.cli.errors import USER_ERRORS, user_errors
from enigma.cli.options import PARAMS_HELP, check_out, load_params

report_app = typer.Typer(help="Leave-one-agent-out reports: build them, show their headline numbers.", no_args_is_help=True)


def _register_errors() -> None:
    from enigma.evaluation.errors import EvaluationError
    from enigma.params import ParamsError

    for exc in (EvaluationError, ParamsError):
        if exc not in USER_ERRORS:
            USER_ERRORS.append(exc)


def _fmt(v) -> str:
    return "  n/a" if v is None else f"{v:+.3f}"


def _ci(c) -> str:
    return "" if not c or c[0] is None else f"[{c[0]:+.2f}, {c[1]:+.2f}]"


def print_summary(summary: dict, path: Path) -> None:
    html = path.parent / "index.html"
    typer.echo(f"report: {html if html.is_file() else '(no HTML page next to it)'}")
    typer.echo(f"summary: {path}")
    typer.echo(f"benchmark {summary['benchmark']}: {summary['n_agents']} agents, ratings {', '.join(summary['ratings'])}")
    order = [r["estimator"] for r in summary.get("ranking", [])] or sorted(summary["estimators"])
    width = max(len(n) for n in order) if order else 10
    typer.echo(f"{'estimator':<{width}}  mean Pearson [95% CI]        mean Spearman [95% CI]       flags")
    for name in order:
        e = summary["estimators"][name]
        typer.echo(
            f"{name:<{width}}  {_fmt(e.get('mean_pearson'))} {_ci(e.get('mean_pearson_ci95')):<20}  "
            f"{_fmt(e.get('mean_spearman'))} {_ci(e.get('mean_spearman_ci95')):<20}  {len(e.get('flags', []))}"
        )
    rows = summary.get("headline_table")
    if rows:  # ENIGMA at a glance: the page's headline table, then where it is not first
        from enigma.evaluation.headline import headline_cells, headline_columns

        heads = headline_columns(rows[0]["stat"], summary.get("settings", {}).get("confidence", 0.95))
        table = [heads] + [headline_cells(row) for row in rows]
        widths = {k: max(len(line[k]) for line in table) for k in heads}
        typer.echo("")
        for line in table:
            typer.echo("  ".join(line[k].ljust(widths[k]) for k in heads).rstrip())
        for row in rows:
            if row.get("note"):
                typer.echo(row["note"])
    elif summary.get("headline"):  # a summary built before the headline table
        typer.echo(summary["headline"])


def _check_benchmark_name(name: str) -> None:
    """``--benchmark`` names the report's folder under ``--out``: a path there (``../../x``, an
    absolute one) wrote the report outside it."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise ValueError(f"--benchmark {name!r}: expected a plain name (no / or \\, not . or ..), "
                         "as it names the report's folder under --out")
    if len(name.encode("utf-8", "surrogateescape")) > 255:
        raise ValueError(f"--benchmark {name[:24]!r}...: too long for a folder's name ({len(name.encode('utf-8', 'surrogateescape'))} "
                         "bytes, 255 at most)")


def register(app: typer.Typer) -> None:
    app.add_typer(report_app, name="report")


@report_app.command("show")
@user_errors
def show(summary: Path = typer.Argument(..., help="reports/<benchmark>/summary.json")) -> None:
    """Print where the report is and its headline numbers."""
    _register_errors()
    from enigma.evaluation.summary_file import read_summary

    print_summary(read_summary(summary), summary)


@report_app.command("build")
@user_errors
def build(
    results: List[Path] = typer.Option(..., help="results table (Parquet/CSV) or leave-one-agent-out results folder; repeatable (e.g. a benchmark's results and results_full)"),
    benchmark: str = typer.Option(..., help="benchmark name; the report goes to <out>/<benchmark>/"),
    truth: Optional[Path] = typer.Option(None, help="truth table (simulator truth.parquet: agent_id, rating, value)"),
    truth_store: Optional[Path] = typer.Option(None, help="experience store: truth = each agent's mean rating"),
    curves: Optional[Path] = typer.Option(None, help="learning curves (Parquet); default: those in the results folder"),
    out: Optional[Path] = typer.Option(None, help="reports folder (default: params report.out_dir)"),
    params: Optional[Path] = typer.Option(None, "--params", help=f"{PARAMS_HELP} (section 'report')"),
    plots: Optional[bool] = typer.Option(None, "--plots/--no-plots", help="draw the figures (default: params)"),
    figures: str = typer.Option("headline", "--figures", help="headline: the overview and ENIGMA's (report.enigma_estimator) figures; all: every estimator's too"),
    note: Optional[str] = typer.Option(None, help="how the agents were run (e.g. stood in for by transcripts), shown in the report"),
) -> None:
    """Build summary.json, figures and index.html from results and the truth (the same report as
    the pipeline's report stage: ENIGMA's run also gives its ablation enigma-unnormalised). The
    page draws the headline figures unless --figures all; every estimator is in its tables."""
    _register_errors()
    import pandas as pd

    from enigma.evaluation.errors import EvaluationError
    from enigma.evaluation.report import SUMMARY_FILE, build_report
    from enigma.evaluation.truth import read_truth, truth_from_store

    if (truth is None) == (truth_store is None):
        raise EvaluationError("give exactly one of --truth (a truth table) or --truth-store (an experience store)")
    _check_benchmark_name(benchmark)
    cfg = load_params(params).with_overrides("report", plots=plots)
    out_dir = (out or cfg.out_dir) / benchmark
    check_out(out_dir, "--out", folder=True)
    if truth is not None:
        truth_table = read_truth(truth)
    else:
        from enigma.store.experience import ExperienceStore

        truth_table = truth_from_store(ExperienceStore.open(truth_store))
    curve_table = None
    if curves is not None:
        if not curves.is_file():
            raise EvaluationError(f"{curves}: learning-curve table not found")
        curve_table = pd.read_parquet(curves)
    summary = build_report(results, truth_table, benchmark, out_dir, cfg, curves=curve_table, note=note, figures=figures)
    print_summary(summary, out_dir / SUMMARY_FILE)


@report_app.command("paper-spe")
@user_errors
def paper_spe(
    variant: str = typer.Option("default", help="'default' or 'hard' (the challenging variant)"),
    data_dir: Optional[Path] = typer.Option(None, help="folder with the See 2019 CSVs (default: data/raw/see2019_convai2_humaneval)"),
    out: Optional[Path] = typer.Option(None, help="reports folder (default: params report.out_dir)"),
    params: Optional[Path] = typer.Option(None, "--params", help=f"{PARAMS_HELP} (section 'report')"),
) -> None:
    """Recompute the ENIGMA paper's self-play (SPE) correlations from its CSV, as a report."""
    _register_errors()
    from enigma.evaluation.paper_spe import CSV_FILES, ESTIMATOR_NAMES, read_spe_csv, see2019_dir
    from enigma.evaluation.report import SUMMARY_FILE, write_report
    from enigma.evaluation.errors import EvaluationError

    if variant not in CSV_FILES:
        raise EvaluationError(f"unknown variant {variant!r}; expected one of {sorted(CSV_FILES)}")
    cfg = load_params(params).report
    benchmark = f"see2019-spe-paper-{variant}"
    out_dir = (out or cfg.out_dir) / benchmark
    check_out(out_dir, "--out", folder=True)
    table, truth_table = read_spe_csv(see2019_dir(data_dir) / CSV_FILES[variant], ESTIMATOR_NAMES[variant])
    # one estimator: its figures are all there are, and the page needs no note on the others
    summary = write_report(table, truth_table, benchmark, out_dir, cfg, figures="all")
    print_summary(summary, out_dir / SUMMARY_FILE)
