"""Evaluation: the leave-one-agent-out protocol (``loao``), correlations with bootstrap
intervals (``correlation``), the truth tables (``truth``), ``summary.json`` (``summary``), the
HTML report with its figures (``report``, ``figures``) and the paper's SPE check
(``paper_spe``). Import the submodules; this package imports nothing heavy itself."""
