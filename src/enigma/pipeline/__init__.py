"""The stage layer: one function per pipeline stage, typed config in, files out. DVC calls them
through ``enigma stage <stage> <benchmark>`` (dvc.yaml stamps the stages out per entry of
``benchmarks``), the Prefect flows wrap them as tasks (``tasks/``), and the CLI's own commands
use the same library calls.

    store      simulate | ingest   -> <data>/<name>/store, truth.parquet          (``store``)
    rollouts   learned customer | self-play transcripts -> <data>/<name>/rollouts (``rollouts``)
    sample     each held-out agent's replies at the logged states -> targets/     (``sample``)
    train      every estimator on every held-out agent -> results[_full]/         (``train``)
    report     summary.json, figures, index.html -> <report.out_dir>/<name>[_full] (``report``)
    track      the report's runs into MLflow                                       (``report``)

Every function takes a ``Benchmark`` (an entry of ``benchmarks`` with its paths resolved) and
the ``Params`` it came from.
"""

from enigma.pipeline.config import Benchmark, BenchmarkConfig, NightlyConfig, PipelineConfig

__all__ = ["Benchmark", "BenchmarkConfig", "NightlyConfig", "PipelineConfig"]
