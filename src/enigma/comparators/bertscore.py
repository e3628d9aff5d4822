"""BERTScore of the agent's replies at logged states against the logged replies, with the
project's local encoder (default all-MiniLM-L6-v2, hidden states of its layer 6, the last; no
IDF weighting, no baseline rescaling). Rating-free: the mean F1 is returned for every rating
(see ``overlap``).

BERTScore encodes every reply and reference; to keep the cost to seconds per agent the pairs
are a fixed-seed subsample of at most ``max_pairs``.
"""

from __future__ import annotations

import numpy as np

from enigma.comparators.config import ComparatorsConfig, fingerprint_of
from enigma.comparators.overlap import ReplyMetricEstimator, ReplyPair


class BertScoreEstimator(ReplyMetricEstimator):
    def __init__(self, config: ComparatorsConfig | None = None):
        self.config = config or ComparatorsConfig()
        self.layer = self.config.overlap.bertscore_layer
        self.name = f"bertscore:{self.config.embedding_model}-L{self.layer}[replies-at-logged-states]"
        self._scorer = None

    def fingerprint(self) -> str:
        return fingerprint_of("bertscore", self.config.embedding_model, self.config.overlap)

    def _get_scorer(self):
        if self._scorer is None:
            from bert_score import BERTScorer

            from enigma.encoders.weights import resolve_weights

            model_dir = resolve_weights(self.config.embedding_model)
            self._scorer = BERTScorer(
                model_type=str(model_dir),
                num_layers=self.layer,
                batch_size=self.config.overlap.bertscore_batch_size,
                idf=False,
                rescale_with_baseline=False,
            )
        return self._scorer

    def f1(self, replies: list[str], references: list[str]) -> np.ndarray:
        if len(replies) != len(references) or not replies:
            raise ValueError(f"BERTScore needs as many replies as references, both non-empty ({len(replies)}, {len(references)})")
        _, _, f = self._get_scorer().score(replies, references)
        return f.numpy()

    def score(self, pairs: list[ReplyPair]) -> tuple[float, dict]:
        cap = self.config.overlap.bertscore_max_pairs
        if len(pairs) > cap:
            pick = np.random.default_rng(self.config.overlap.seed).choice(len(pairs), cap, replace=False)
            pairs = [pairs[i] for i in sorted(pick)]
        return float(self.f1([p.reply for p in pairs], [p.reference for p in pairs]).mean()), {"n_scored_pairs": len(pairs)}
