"""Trivial baselines: the experience mean (one number for every agent) and reply length."""

from __future__ import annotations

import numpy as np

from enigma.comparators.calibration import RatingRegressor
from enigma.comparators.config import fingerprint_of
from enigma.comparators.dialogues import (
    ComparatorInputError,
    logged_dialogues,
    rating_matrix,
    target_dialogues,
)
from enigma.comparators.features import FeatureExtractor
from enigma.contracts import EstimateResult, HeldOutAgent, Regime
from enigma.store.experience import ExperienceStore


class ExperienceMean:
    """The mean rating of the other agents' dialogues: what one predicts knowing nothing about
    the agent. Its correlation with the truth is undefined (constant), which is the point: any
    estimator must beat its error."""

    name = "experience-mean"
    regimes = frozenset({Regime.NONE})

    def fingerprint(self) -> str:
        return fingerprint_of("experience-mean")

    def estimate(self, experience: ExperienceStore, target: HeldOutAgent) -> EstimateResult:
        names = experience.rating_names
        y = rating_matrix(experience, names)
        out = {}
        for j, n in enumerate(names):
            col = y[:, j][np.isfinite(y[:, j])]
            if col.size == 0:
                raise ComparatorInputError(f"rating {n!r}: no rated dialogue in the experience data")
            out[n] = float(col.mean())
        return EstimateResult(out)


class ReplyLength:
    """Mean words per reply, mapped to each rating by a 1-D linear regression fitted on the
    other agents' rated dialogues (so a rating that falls with length gets a negative slope)."""

    regimes: frozenset[Regime]

    def __init__(self, regime: Regime = Regime.REPLIES_AT_LOGGED_STATES, ridge_alpha: float = 1.0):
        self.regime = regime
        self.regimes = frozenset({regime})
        self.name = f"reply-length[{regime.value}]"
        self.ridge_alpha = ridge_alpha

    def fingerprint(self) -> str:
        return fingerprint_of("reply-length", self.regime.value, self.ridge_alpha)

    def estimate(self, experience: ExperienceStore, target: HeldOutAgent) -> EstimateResult:
        names = experience.rating_names
        fx = FeatureExtractor()
        x = fx.matrix(logged_dialogues(experience), ["length"])
        model = RatingRegressor.fit(x, rating_matrix(experience, names), names, self.ridge_alpha)
        got = target_dialogues(experience, target, self.regime)
        xt = fx.matrix(got.dialogues, ["length"])
        diagnostics = {
            "n_dialogues": len(got.dialogues),
            "n_failed_replies": got.n_failed_replies,
            "mean_length": float(xt.mean()),
        }
        return EstimateResult(model.estimate(xt), diagnostics=diagnostics)
