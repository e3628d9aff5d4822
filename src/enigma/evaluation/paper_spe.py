"""The ENIGMA paper's self-play evaluation (SPE) numbers on See 2019, recomputed through this
package's correlation and summary code: a check of that code against published figures.

``selfplay_est_hmjiang.csv`` (and the "hard" variant) hold, per bot, the true normalised human
mean of each metric (``<metric>``) next to the SPE estimate (``<metric>_sp``). The paper's
averages are reproduced by averaging over all ten columns that have an ``_sp`` partner (the
nine questions AND ``reward``, their mean) and over all 28 bots in the file (the human
baseline is not in it): mean Pearson 0.591 / Spearman 0.435, hard variant 0.356 / 0.143.
Leaving ``reward`` out gives 0.578 / 0.423 instead, so the paper did count it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from enigma.evaluation.config import ReportConfig
from enigma.evaluation.errors import EvaluationError
from enigma.evaluation.results import RESULT_COLUMNS, check_results
from enigma.evaluation.summary import build_summary
from enigma.evaluation.truth import check_truth

# Where the repository keeps the See 2019 inputs, relative to its root: the working directory of
# the CLI and the pipeline (never this file's location, which is site-packages once installed).
SEE2019_DIR = Path("data/raw/see2019_convai2_humaneval")


def see2019_dir(data_dir: str | Path | None = None) -> Path:
    """``data_dir``, or the repository's copy; a clear error when the folder is not there."""
    path = Path(data_dir) if data_dir is not None else SEE2019_DIR
    if not path.is_dir():
        hint = "" if data_dir is not None else (
            " (the default, relative to the working directory: run from the repository root or pass --data-dir)")
        raise EvaluationError(f"{path}: See 2019 data folder not found{hint}")
    return path


CSV_FILES = {"default": "selfplay_est_hmjiang.csv", "hard": "selfplay_hard_est_hmjiang.csv"}
ESTIMATOR_NAMES = {"default": "spe-paper", "hard": "spe-paper-hard"}
# The label shown beside these numbers in a report.
LABEL = "precomputed by the ENIGMA authors (RoBERTa reward model on each bot's self-play); read from their CSV"


def read_spe_csv(path: str | Path, estimator: str = "spe-paper") -> tuple[pd.DataFrame, pd.DataFrame]:
    """The CSV as a results table (one estimator) and a truth table."""
    path = Path(path)
    if not path.is_file():
        raise EvaluationError(f"{path}: self-play estimate CSV not found")
    df = pd.read_csv(path)
    if "model_name" not in df.columns:
        raise EvaluationError(f"{path}: column 'model_name' missing")
    metrics = [c for c in df.columns if c != "model_name" and not c.endswith("_sp") and f"{c}_sp" in df.columns]
    if not metrics:
        raise EvaluationError(f"{path}: no '<metric>' / '<metric>_sp' column pairs")
    truth_rows, result_rows = [], []
    for i, row in enumerate(df.itertuples(index=False), start=2):  # line 1 is the header
        agent = row.model_name
        for m in metrics:
            t, e = getattr(row, m), getattr(row, f"{m}_sp")
            if pd.isna(t) or pd.isna(e):
                raise EvaluationError(f"{path}: line {i} (model {agent}): field '{m if pd.isna(t) else m + '_sp'}' is empty")
            truth_rows.append({"agent_id": agent, "rating": m, "value": float(t)})
            result_rows.append(
                {
                    "estimator": estimator,
                    "agent_id": agent,
                    "rating": m,
                    "estimate": float(e),
                    "regime": "own-rollouts",
                    "labels": f'{{"source": "{LABEL}"}}',
                    "diagnostics": "{}",
                }
            )
    truth = check_truth(pd.DataFrame(truth_rows), source=str(path))
    results = check_results(pd.DataFrame(result_rows).reindex(columns=RESULT_COLUMNS), source=str(path))
    return results, truth


def paper_spe_summary(variant: str = "default", data_dir: str | Path | None = None, config: ReportConfig | None = None) -> dict:
    """The summary (as ``summary.json`` holds it) of the paper's SPE estimates."""
    if variant not in CSV_FILES:
        raise EvaluationError(f"unknown SPE variant {variant!r}; expected one of {sorted(CSV_FILES)}")
    path = see2019_dir(data_dir) / CSV_FILES[variant]
    results, truth = read_spe_csv(path, ESTIMATOR_NAMES[variant])
    summary, _ = build_summary(results, truth, f"see2019-spe-paper-{variant}", config)
    return summary
