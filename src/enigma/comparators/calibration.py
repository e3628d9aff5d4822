"""Mapping a dialogue-level score (or feature vector) to each rating, fitted on the other
agents' rated dialogues.

Comparators that compute something rating-free (a feature, a reward model's input) learn the
map to each rating from the experience data: standardised inputs, ridge regression, one model
per rating, fitted on every dialogue that has that rating. The held-out agent's estimate is the
mean prediction over its dialogues (the mean of a linear map is the map of the mean).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import Ridge
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler


@dataclass
class RatingRegressor:
    names: list[str]
    models: dict[str, Pipeline]
    n_train: dict[str, int]

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, names: list[str], alpha: float = 1.0) -> "RatingRegressor":
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 1:
            x = x[:, None]
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"{x.shape[0]} feature rows but {y.shape[0]} rating rows")
        if not np.isfinite(x).all():
            raise ValueError("features contain NaN or infinite values")
        models, n_train = {}, {}
        for j, name in enumerate(names):
            keep = np.isfinite(y[:, j])
            if keep.sum() < 2:
                raise ValueError(f"rating {name!r}: fewer than 2 rated dialogues to fit on")
            m = make_pipeline(StandardScaler(), Ridge(alpha=alpha))
            m.fit(x[keep], y[keep, j])
            models[name], n_train[name] = m, int(keep.sum())
        return cls(list(names), models, n_train)

    def predict(self, x: np.ndarray) -> dict[str, np.ndarray]:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 1:
            x = x[:, None]
        return {n: self.models[n].predict(x) for n in self.names}

    def estimate(self, x: np.ndarray) -> dict[str, float]:
        """Mean prediction over the rows of ``x`` (the held-out agent's dialogues)."""
        return {n: float(np.mean(p)) for n, p in self.predict(x).items()}
