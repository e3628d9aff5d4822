"""The leave-one-agent-out report (summary.json, figures, index.html) of one benchmark run."""

from __future__ import annotations

from prefect import task


# Not cached: it is cheap next to training, and must always reflect the result files on disk.
@task(name="write-report")
def write_report(
    rows: list[dict],
    benchmark: str,
    out_dir: str,
    *,
    store_dir: str,
    truth_path: str | None = None,
    results_dir: str | list[str] | None = None,  # where the learning curves are (one dir or several)
    report: dict | None = None,
) -> dict:
    """Correlations of the estimates with the truth (the simulator's exact values, or each
    agent's own mean rating in the store) and the report pages; returns the summary."""
    import pandas as pd

    from enigma.evaluation.config import ReportConfig
    from enigma.evaluation.results import RESULT_COLUMNS, check_results, read_curves
    from enigma.evaluation.report import write_report as _write
    from enigma.evaluation.truth import read_truth, truth_from_store
    from enigma.store.experience import ExperienceStore

    from enigma.evaluation.ablations import with_unnormalised

    cfg = ReportConfig.model_validate(report or {})
    results = check_results(pd.DataFrame(rows)[RESULT_COLUMNS], f"{benchmark} results")
    # ENIGMA without post-normalisation: from the same run's unnormalised estimates, not retrained
    results = with_unnormalised(results, (cfg.enigma_estimator,))
    truth = read_truth(truth_path) if truth_path else truth_from_store(ExperienceStore.open(store_dir))
    curves = read_curves(results_dir) if results_dir else None
    return _write(results, truth, benchmark, out_dir, cfg, curves=curves)
