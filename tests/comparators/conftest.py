"""Small hand-made stores for the comparators' tests."""

from __future__ import annotations

import pytest

from tests.stores import chat_store


make_store = chat_store


@pytest.fixture
def store_factory():
    return make_store


class WordCounts:
    """A bag-of-words embedder over a fixed vocabulary: enough to test the plumbing of
    estimators that embed text, without loading a model."""

    vocab = ["dogs", "cats", "travel", "music", "?", "hi", "ok"]

    def embed(self, texts):
        import numpy as np

        return np.array([[t.count(w) for w in self.vocab] + [1.0] for t in texts], dtype=np.float32)


@pytest.fixture
def word_counts():
    return WordCounts()
