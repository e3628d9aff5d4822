"""The encode stage: fill the embedding cache for a store and the sampled target replies.

Run once before a leave-one-agent-out study (or after new targets were sampled) so that the
per-agent estimation only looks vectors up. Idempotent and resumable: texts already cached are
skipped, and an interrupted run keeps every finished shard (see ``text_cache``).
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

import pyarrow as pa

from enigma.encoders.text_cache import EmbeddingCache
from enigma.store.experience import ExperienceStore

if TYPE_CHECKING:
    from enigma.encoders.config import EncodeConfig


@dataclass(frozen=True)
class WarmStats:
    texts: int  # distinct non-blank texts asked for
    newly_encoded: int  # of those, how many the model had to encode
    cache_dir: str

    def as_dict(self) -> dict:
        return {"texts": self.texts, "newly_encoded": self.newly_encoded, "cache_dir": self.cache_dir}


def store_texts(store: ExperienceStore) -> list[str]:
    """Every distinct non-blank utterance of the store, in first-seen order."""
    return list(dict.fromkeys(t for t in store.turns.column("text").to_pylist() if t.strip()))


def target_texts(table: pa.Table, name: str = "targets") -> list[str]:
    """The successfully sampled replies of a ``sample_targets`` table (rows whose ``error`` is
    set have no reply and are left to the estimator's ``missing_targets`` policy)."""
    if "text" not in table.column_names:
        raise ValueError(f"{name}: no 'text' column (expected a sampled-targets table)")
    texts = table.column("text").to_pylist()
    errors = table.column("error").to_pylist() if "error" in table.column_names else [None] * len(texts)
    out = []
    for row, (text, error) in enumerate(zip(texts, errors)):
        if error is not None:
            continue
        if not isinstance(text, str):
            raise ValueError(f"{name}: row {row}: field 'text' is {type(text).__name__} but 'error' is empty")
        if text.strip():
            out.append(text)
    return list(dict.fromkeys(out))


def warm_texts(store: ExperienceStore | None = None, targets: Iterable[tuple[str, pa.Table]] = ()) -> list[str]:
    """The store's utterances and each named targets table's replies, once each, in first-seen order."""
    texts: list[str] = store_texts(store) if store is not None else []
    for name, table in targets:
        texts.extend(target_texts(table, name))
    return list(dict.fromkeys(texts))


def warm_cache(cache: EmbeddingCache, store: ExperienceStore | None = None, targets: Iterable[tuple[str, pa.Table]] = ()) -> WarmStats:
    """Encode what is not cached yet: the store's utterances and each named targets table's replies."""
    texts = warm_texts(store, targets)
    before = cache.encoded_count
    cache.embed(texts)
    return WarmStats(texts=len(texts), newly_encoded=cache.encoded_count - before, cache_dir=str(cache.dir))


def encode_in_pool(cache: EmbeddingCache, texts: Sequence[str], settings: "EncodeConfig", pool: Executor, workers: int,
                   progress: bool = False) -> int:
    """Encode what ``texts`` has not cached with ``workers`` processes of ``pool``, each on one
    torch thread: ``cache.plan``'s batches dealt out in turn, each worker writing its own shards,
    so the cache ends as one process's ``embed(texts)`` would leave it. On 2 cores two one-thread
    processes encode faster than one two-thread process (``studies/results/encode_processes.md``).
    ``settings`` builds each worker's cache (the same model and folder as ``cache``). Returns the
    texts encoded."""
    batches = cache.plan(texts)
    shares = [batches[i::workers] for i in range(workers)]
    futures = [pool.submit(encode_share, settings, share, progress, i) for i, share in enumerate(shares) if share]
    encoded = sum(f.result() for f in futures)
    cache.refresh()
    return encoded


def encode_share(settings: "EncodeConfig", batches: list[list[str]], progress: bool = False, position: int = 0) -> int:
    """One worker's share of ``encode_in_pool``: its batches into the cache, as given."""
    cache = settings.embedding_cache(progress=progress)
    return cache.encode_batches(batches, desc=f"encoding texts ({position + 1})", position=position)
