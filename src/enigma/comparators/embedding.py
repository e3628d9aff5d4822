"""The text embedder comparators share: helper C2's on-disk EmbeddingCache, built lazily so
that comparators which never embed do not load a model."""

from __future__ import annotations

import numpy as np

from enigma.comparators.config import ComparatorsConfig


class LazyEmbedder:
    def __init__(self, config: ComparatorsConfig):
        self.config = config
        self._cache = None

    def embed(self, texts: list[str]) -> np.ndarray:
        if self._cache is None:
            from enigma.encoders.text_cache import EmbeddingCache

            self._cache = EmbeddingCache(model=self.config.embedding_model, cache_dir=self.config.cache_dir)
        return np.asarray(self._cache.embed(list(texts)), dtype=np.float32)
