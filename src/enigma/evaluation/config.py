"""The typed ``report`` section of ``params.yaml``."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator


class SplitConfig(BaseModel):
    """``report.split`` of params.yaml."""

    model_config = ConfigDict(extra="forbid")

    salt: str = Field("enigma-split-1", min_length=1)
    test_share: float = Field(0.5, gt=0.0, lt=1.0)
    # benchmarks built after the defaults were frozen, never used to choose: every agent is test
    test_only: list[str] = []
    # benchmarks built to choose on (e.g. the delayed-rating stores): every agent is dev
    dev_only: list[str] = []

    @model_validator(mode="after")
    def _apart(self) -> "SplitConfig":
        both = sorted(set(self.test_only) & set(self.dev_only))
        if both:
            raise ValueError(f"report.split: {both} named in both test_only and dev_only")
        return self


class ReportConfig(BaseModel):
    """Correlations, intervals and the report pages."""

    model_config = ConfigDict(extra="forbid")

    out_dir: Path = Path("reports")
    bootstrap_resamples: int = Field(1000, ge=10)
    seed: int = 0
    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    # An estimator whose estimates spread less than this fraction of the truth's spread has
    # (nearly) collapsed to a constant; its correlations are then noise or artefacts.
    collapse_spread_ratio: float = Field(0.1, ge=0.0)
    # The leave-one-out mean of the other agents' logs (the estimator of this name) correlates
    # about -1 with the truth; an estimator whose estimates correlate with it at least this much
    # is mostly that mean and is flagged (its partial correlation beyond it is reported).
    loo_mean_estimator: str = "experience-mean"
    loo_mean_flag: float = Field(0.5, gt=-1.0, le=1.0)
    rank_by: str = Field("mean_pearson", pattern="^mean_(pearson|spearman|kendall)$")
    # The estimator the headline sentence is about ("is ENIGMA the best here?").
    enigma_estimator: str = "enigma"
    # Ratings to report (None: every rating present in the truth table).
    ratings: list[str] | None = None
    # Plots are the slow part of a report; tests and quick looks can switch them off.
    plots: bool = True
    # Which agents' correlations choices may read (dev) and which the reports lead with (test).
    split: SplitConfig = Field(default_factory=SplitConfig)
