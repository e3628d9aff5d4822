"""The report and track stages: a benchmark's leave-one-agent-out report (``summary.json``,
the headline figures, ``index.html`` in ``<report.out_dir>/<name>``; with ``full``, every
estimator of the main and the full run side by side, with every estimator's figures, in
``<name>_full``) and its MLflow runs (a parent run, a child
per (estimator, held-out agent), ENIGMA's heads as models)."""

from __future__ import annotations

from typing import Any

from enigma.params import Params
from enigma.pipeline.config import Benchmark


def _parts(b: Benchmark, full: bool) -> tuple[list, list[str]]:
    """The results folders a report reads and the registry names of their estimators."""
    if not full:
        return [b.results_dir()], b.estimators()
    dirs = [b.results_dir()] + ([b.results_dir(full=True)] if b.estimators(full=True) else [])
    return dirs, b.estimators() + b.estimators(full=True)


def report(b: Benchmark, params: Params, full: bool = False, progress: bool = False) -> dict[str, Any]:
    """Write the report; returns its summary (with ``report_html`` and ``summary_json``)."""
    from enigma.estimators import build_estimator
    from enigma.evaluation.report import build_report
    from enigma.evaluation.truth import read_truth

    dirs, names = _parts(b, full)
    shown = [build_estimator(n, params).name for n in names]
    notes = {show: params.estimators[n].note for n, show in zip(names, shown)
             if n in params.estimators and params.estimators[n].note}
    sized = sizing_notes(params)
    notes |= {show: sized[n] for n, show in zip(names, shown) if n in sized}
    # The main report draws the headline figures; the full one every estimator's. Both pages and
    # summaries may be in git, the full report's figures are DVC outputs (dvc.yaml), and each page
    # says so.
    return build_report(dirs, read_truth(b.truth), b.name, b.report_dir(full), params.report, estimators=shown,
                        note=b.config.note, estimator_notes=notes, figures="all" if full else "headline",
                        more_figures=full_figures_note(b) if full else full_report_note(b), progress=progress)


def sizing_notes(params: Params) -> dict[str, str]:
    """The labels of the comparators that score a sample of each agent's replies rather than all
    of them (their cost on CPU), so that a report says how they were sized."""
    c = params.comparators
    return {
        "perplexity": f"sized: a fixed-seed sample of at most {c.perplexity.max_replies} replies per agent "
                      "(comparators.perplexity.max_replies; a language model on CPU)",
        "bertscore": f"sized: a fixed-seed sample of at most {c.overlap.bertscore_max_pairs} reply pairs per agent "
                     "(comparators.overlap.bertscore_max_pairs)",
    }


def full_report_note(b: Benchmark) -> str:
    """The main page's plain-text sentence on where every estimator's figures are (not a link:
    a fresh clone has the full report's page only where git tracks it, and never its figures)."""
    return (f"Every estimator's figures are in the full report, {b.report_dir(full=True).as_posix()}/index.html; "
            f"its figures are DVC outputs, not git's: dvc repro report_full@{b.name} builds them.")


def full_figures_note(b: Benchmark) -> str:
    """The full page's sentence on its figures, which a fresh clone does not have."""
    return (f"This page's figures are DVC outputs, not git's (a fresh clone shows their links broken): "
            f"dvc repro report_full@{b.name} draws them.")


def track(b: Benchmark, params: Params, summary: dict[str, Any], full: bool = False) -> dict[str, Any]:
    """Log the reported run to MLflow (``tracking``); returns the run ids, or {} when tracking is
    off."""
    from enigma.estimators import build_estimator
    from enigma.evaluation.report import read_result_dirs
    from enigma.evaluation.results import artifact_path, read_curves
    from enigma.tracking.results import headline_metrics, results_from_report
    from enigma.tracking.mlflow_log import log_benchmark_run

    cfg = params.tracking
    if not cfg.enabled:
        return {}
    dirs, names = _parts(b, full)
    rows = read_result_dirs(dirs, [build_estimator(n, params).name for n in names]).to_dict(orient="records")
    for r in rows:
        heads = next((p for d in dirs if (p := artifact_path(d, r["estimator"], r["agent_id"], "heads")).is_file()), None)
        r["heads_path"] = str(heads) if heads else None
    run_params = {"benchmark": b.name, "store": str(b.store), "estimators": ",".join(names)}
    for name in names:
        if name in params.estimators:
            run_params.update({f"{name}.{k}": v for k, v in params.estimators[name].dice.items()})
    run = log_benchmark_run(
        f"{b.name}-full" if full else b.name,
        results_from_report(rows, summary, read_curves(dirs)),
        cfg=cfg, run_params=run_params, summary=headline_metrics(summary), report_dir=b.report_dir(full),
    )
    return {"parent_run_id": run.parent_run_id, "children": run.child_run_ids, "registered": run.registered}
