"""See et al. (2019) dialogue features as estimators: each feature alone, or all of them
combined by ridge regression, fitted on the other agents' rated dialogues and applied to the
held-out agent's dialogues as its regime gives them (replies at logged states, or its own
rollouts / self-play)."""

from __future__ import annotations

from typing import Sequence

from enigma.comparators.calibration import RatingRegressor
from enigma.comparators.config import ComparatorsConfig, fingerprint_of
from enigma.comparators.dialogues import logged_dialogues, rating_matrix, target_dialogues
from enigma.comparators.embedding import LazyEmbedder
from enigma.comparators.features import FEATURES, Embedder, FeatureExtractor, NidfTable
from enigma.contracts import EstimateResult, HeldOutAgent, Regime
from enigma.store.experience import ExperienceStore


class DialogueFeatureEstimator:
    regimes: frozenset[Regime]

    def __init__(
        self,
        features: Sequence[str] = FEATURES,
        regime: Regime = Regime.REPLIES_AT_LOGGED_STATES,
        config: ComparatorsConfig | None = None,
        embedder: Embedder | None = None,
        name: str | None = None,
    ):
        unknown = [f for f in features if f not in FEATURES]
        if unknown or not features:
            raise ValueError(f"unknown or no feature(s) {list(unknown)}; known: {list(FEATURES)}")
        self.features = tuple(features)
        self.regime = regime
        self.regimes = frozenset({regime})
        self.config = config or ComparatorsConfig()
        self.embedder = embedder if embedder is not None else (
            LazyEmbedder(self.config) if "relatedness" in self.features else None
        )
        label = self.features[0] if len(self.features) == 1 else "ridge"
        self.name = name or f"see-features:{label}[{regime.value}]"

    def fingerprint(self) -> str:
        emb = self.config.embedding_model if "relatedness" in self.features else None
        return fingerprint_of("see-features", self.features, self.regime.value, self.config.ridge_alpha, emb)

    def estimate(self, experience: ExperienceStore, target: HeldOutAgent) -> EstimateResult:
        names = experience.rating_names
        train = logged_dialogues(experience)
        nidf = None
        if "specificity" in self.features:
            nidf = NidfTable.from_texts(t.text for d in train for t in d.turns)
        fx = FeatureExtractor(nidf=nidf, embedder=self.embedder)
        model = RatingRegressor.fit(
            fx.matrix(train, self.features), rating_matrix(experience, names), names, self.config.ridge_alpha
        )
        got = target_dialogues(experience, target, self.regime)
        xt = fx.matrix(got.dialogues, self.features)
        diagnostics = {
            "n_dialogues": len(got.dialogues),
            "n_failed_replies": got.n_failed_replies,
            "feature_means": dict(zip(self.features, map(float, xt.mean(axis=0)))),
        }
        return EstimateResult(model.estimate(xt), diagnostics=diagnostics)


def see_feature_estimators(
    regime: Regime, config: ComparatorsConfig | None = None, embedder: Embedder | None = None
) -> list[DialogueFeatureEstimator]:
    """Every feature alone plus the ridge combination, for one regime."""
    config = config or ComparatorsConfig()
    embedder = embedder if embedder is not None else LazyEmbedder(config)
    singles = [DialogueFeatureEstimator((f,), regime, config, embedder) for f in FEATURES]
    return singles + [DialogueFeatureEstimator(FEATURES, regime, config, embedder)]
