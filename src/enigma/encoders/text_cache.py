"""Sentence embeddings cached on disk by text, so that no text is ever encoded twice.

A leave-one-agent-out study encodes the same logged utterances for every held-out agent; this
cache makes the second and later agents pay only for their own sampled replies.

Layout: ``<cache_dir>/<namespace>/shard-*.npz`` where the namespace fingerprints the model
directory and the pooling settings. Each shard holds ``keys`` (16-byte BLAKE2b digests of the
UTF-8 text, as a ``[n, 16]`` uint8 array) and ``vectors`` (``[n, d]`` float32). Shards are
written to a temporary name and renamed into place, so readers (other processes included) only
ever see complete shards; an interrupted run writes out the batches it finished (a killed one
keeps every shard it completed), and rerunning resumes where it stopped. Nothing is ever rewritten in place; ``compact()`` merges shards.

Embeddings are the attention-masked mean of the last hidden layer, L2-normalised (the
sentence-transformers recipe of all-MiniLM-L6-v2 and all-mpnet-base-v2). Texts longer than
``max_length`` tokens are truncated to their first ``max_length`` tokens.

A text's vector is a function of the text alone, to the bit. Padded to the longest text of its
batch, a text's vector changed in its last bits with the batch it happened to share, so a cache
filled in another order (a fresh clone, another benchmark first) gave other estimates in their
last bits, and ``dvc repro`` changed outputs that should not change. Each text is now padded to
its own length rounded up to ``PAD_MULTIPLE`` tokens, and a model call only ever holds texts of
one padded length (``studies/results/encode_canonical.md``: 0 of the texts differ in any bit
whatever batch or thread count encoded them). ``VECTORS`` names this recipe in the namespace, so
the vectors of the old one are never mixed in.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from enigma.encoders.weights import default_cache_dir, model_fingerprint, resolve_weights
from enigma.model_loading import MODEL_LOAD_LOCK
from enigma.writes import naming, write_atomic, write_text

KEY_BYTES = 16
PAD_MULTIPLE = 8
VECTORS = 2  # 2: padded per text to a multiple of PAD_MULTIPLE tokens (1: to the batch's longest text)


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=KEY_BYTES).digest()


def pick_device(device: str | None = None) -> str:
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class EmbeddingCache:
    """``embed(texts)`` returns float32 ``[n, d]`` sentence vectors, encoding only unseen texts.

    The model is loaded lazily, on the first cache miss, so a fully cached study never loads it.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] = "minilm",
        cache_dir: str | os.PathLike[str] | None = None,
        *,
        batch_size: int = 64,
        max_length: int = 256,
        shard_size: int = 2048,
        device: str | None = None,
        progress: bool = True,
        weights_cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if batch_size < 1 or shard_size < 1 or max_length < 2:
            raise ValueError("batch_size and shard_size must be >= 1 and max_length >= 2")
        self.model_dir = resolve_weights(model, cache_dir=weights_cache_dir)
        self.batch_size = batch_size
        self.max_length = max_length
        self.shard_size = shard_size
        self.progress = progress
        self._device = device
        settings = {"model": model_fingerprint(self.model_dir), "pooling": "mean", "normalise": True, "max_length": max_length,
                    "vectors": VECTORS}
        self.namespace = hashlib.blake2b(json.dumps(settings, sort_keys=True).encode(), digest_size=10).hexdigest()
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "embeddings"
        self.dir = root / self.namespace
        with naming(self.dir):
            self.dir.mkdir(parents=True, exist_ok=True)
        meta = self.dir / "settings.json"
        if not meta.exists():
            write_text(meta, json.dumps({**settings, "model_dir": str(self.model_dir)}, indent=2))
        self._index: dict[bytes, tuple[int, int]] = {}
        self._blocks: list[np.ndarray] = []
        self._seen_shards: set[str] = set()
        self._dim: int | None = None
        self._model: Any = None
        self._tokenizer: Any = None
        self.encoded_count = 0  # texts this instance ran through the model (for tests and logs)

    def __deepcopy__(self, memo: dict) -> "EmbeddingCache":
        # The cache is a shared on-disk resource, not model state: a copied encoder (e.g. the
        # trainer's weight-averaged copy) shares it rather than duplicating vectors and model.
        return self

    # ------------------------------------------------------------------ reading
    def refresh(self) -> None:
        """Load shards written since the last look (by this or another process)."""
        for shard in sorted(self.dir.glob("shard-*.npz")):
            if shard.name in self._seen_shards:
                continue
            try:
                with np.load(shard) as data:
                    keys, vectors = data["keys"], data["vectors"]
            except Exception as exc:  # a shard is renamed into place whole, so this is real damage
                raise RuntimeError(f"embedding cache shard {shard} is unreadable ({exc}); delete it to re-encode its texts") from exc
            if keys.ndim != 2 or keys.shape[1] != KEY_BYTES or vectors.ndim != 2 or len(keys) != len(vectors):
                raise RuntimeError(f"embedding cache shard {shard} has malformed arrays; delete it to re-encode its texts")
            if self._dim is None:
                self._dim = int(vectors.shape[1])
            elif vectors.shape[1] != self._dim:
                raise RuntimeError(f"embedding cache shard {shard} has dimension {vectors.shape[1]}, expected {self._dim}")
            block = len(self._blocks)
            self._blocks.append(vectors.astype(np.float32, copy=False))
            for row, key in enumerate(keys):
                self._index.setdefault(key.tobytes(), (block, row))
            self._seen_shards.add(shard.name)

    def __len__(self) -> int:
        self.refresh()
        return len(self._index)

    def __contains__(self, text: str) -> bool:
        self.refresh()
        return text_key(text) in self._index

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.refresh()
        if self._dim is None:
            with MODEL_LOAD_LOCK:  # transformers' lazy import is not thread-safe (enigma.model_loading)
                from transformers import AutoConfig

                self._dim = int(AutoConfig.from_pretrained(self.model_dir).hidden_size)
        return self._dim

    # ------------------------------------------------------------------ encoding
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"EmbeddingCache.embed: item {i} is {type(text).__name__}, expected str")
        keys = [text_key(t) for t in texts]
        if not all(key in self._index for key in keys):
            # only a text not seen yet needs a look at the shards other processes wrote since;
            # listing them on every call cost more than the lookups of a per-state agent call
            self.refresh()
        missing = self._missing(keys, texts)
        if missing:
            self.encode_batches(self._batches(missing))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, key in enumerate(keys):
            block, row = self._index[key]
            out[i] = self._blocks[block][row]
        return out

    def _load_tokenizer(self) -> Any:
        with MODEL_LOAD_LOCK:  # transformers' lazy import is not thread-safe (enigma.model_loading)
            if self._tokenizer is None:
                from transformers import AutoTokenizer

                self._tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        return self._tokenizer

    def _load_model(self) -> None:
        # Under the lock: threads of one process (Prefect's task runner) may load encoders at once,
        # and transformers' lazy import is not thread-safe (enigma.model_loading). Checked again
        # inside it, so threads sharing this cache load its model once.
        self._load_tokenizer()
        with MODEL_LOAD_LOCK:
            if self._model is not None:
                return
            from transformers import AutoModel

            model = AutoModel.from_pretrained(self.model_dir).eval().to(pick_device(self._device))
            for param in model.parameters():
                param.requires_grad_(False)
            self._model = model  # last: a model that is set is ready to run

    def _token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        if not texts:  # every text cached (a rerun): the tokenizer fails on an empty batch
            return []
        return self._load_tokenizer()(list(texts), truncation=True, max_length=self.max_length)["input_ids"]

    @staticmethod
    def _padded(n_tokens: int) -> int:
        return -(-n_tokens // PAD_MULTIPLE) * PAD_MULTIPLE

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        """One model call per padded length among ``texts`` (one, for the batches ``plan`` makes)."""
        ids = self._token_ids(texts)
        groups: dict[int, list[int]] = {}
        for i, row in enumerate(ids):
            groups.setdefault(self._padded(len(row)), []).append(i)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for length, rows in groups.items():
            out[rows] = self._encode_padded([{"input_ids": ids[i]} for i in rows], length)
        return out

    def _encode_padded(self, features: list[dict[str, list[int]]], length: int) -> np.ndarray:
        import torch

        device = next(self._model.parameters()).device
        enc = self._tokenizer.pad(features, padding="max_length", max_length=length, return_attention_mask=True,
                                  return_tensors="pt")
        enc = {k: v.to(device) for k, v in enc.items()}
        with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            hidden = self._model(**enc).last_hidden_state.float()
        mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp_min(1.0)
        pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
        return pooled.cpu().numpy().astype(np.float32)

    def _missing(self, keys: Sequence[bytes], texts: Sequence[str]) -> list[str]:
        """The texts not cached, once each, in first-seen order."""
        missing: dict[bytes, str] = {}
        for key, text in zip(keys, texts):
            if key not in self._index and key not in missing:
                missing[key] = text
        return list(missing.values())

    def _batches(self, texts: Sequence[str]) -> list[list[str]]:
        # One padded length to a batch: each text's padding is its own (the module's docstring).
        by_length: dict[int, list[str]] = {}
        for text, row in zip(texts, self._token_ids(texts)):
            by_length.setdefault(self._padded(len(row)), []).append(text)
        return [group[i : i + self.batch_size] for length in sorted(by_length)
                for group in (by_length[length],) for i in range(0, len(group), self.batch_size)]

    def plan(self, texts: Sequence[str]) -> list[list[str]]:
        """The model batches that ``embed(texts)`` would run: the texts not cached yet, once each,
        grouped by padded length, ``batch_size`` to a batch. A text's vector is a function of the
        text alone (not of its batch, process or torch thread count), so the batches may be shared
        out among processes (``encode_batches``) with the same vectors as one process running them
        all, or as any other order of filling the cache."""
        self.refresh()
        return self._batches(self._missing([text_key(t) for t in texts], texts))

    def encode_batches(self, batches: Sequence[Sequence[str]], desc: str = "encoding texts", position: int = 0) -> int:
        """Run the model on each batch as given and add the vectors to the cache (a shard every
        ``shard_size`` texts, so an interruption keeps the finished ones); returns the texts encoded."""
        from tqdm.auto import tqdm

        if not batches:
            return 0
        if self._model is None:
            self._load_model()
        pending_keys: list[bytes] = []
        pending_vecs: list[np.ndarray] = []
        bar = tqdm(total=sum(len(b) for b in batches), desc=desc, unit="text", disable=not self.progress, position=position)
        before = self.encoded_count
        try:
            for chunk in batches:
                vecs = self._encode_batch(list(chunk))
                self.encoded_count += len(chunk)
                pending_keys.extend(text_key(t) for t in chunk)
                pending_vecs.append(vecs)
                bar.update(len(chunk))
                if len(pending_keys) >= self.shard_size:
                    self._write_shard(pending_keys, np.concatenate(pending_vecs))
                    pending_keys, pending_vecs = [], []
        finally:
            # Also on an interruption (Ctrl-C, an error in a later batch): keep finished batches.
            if pending_keys:
                self._write_shard(pending_keys, np.concatenate(pending_vecs))
            bar.close()
        self.refresh()
        return self.encoded_count - before

    def _write_shard(self, keys: list[bytes], vectors: np.ndarray) -> None:
        key_arr = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), KEY_BYTES)
        name = f"shard-{os.getpid()}-{uuid.uuid4().hex}.npz"

        def write(fh) -> None:
            np.savez(fh, keys=key_arr, vectors=vectors.astype(np.float32, copy=False))
            fh.flush()
            os.fsync(fh.fileno())

        write_atomic(self.dir / name, write)  # whole or not at all: a full disk leaves no shard

    def compact(self) -> None:
        """Merge all shards into one (run when no other process is writing)."""
        self.refresh()
        shards = sorted(self.dir.glob("shard-*.npz"))
        if len(shards) <= 1:
            return
        keys = list(self._index)
        vectors = np.stack([self._blocks[b][r] for b, r in (self._index[k] for k in keys)])
        self._write_shard(keys, vectors)
        for shard in shards:
            shard.unlink()
        self._index, self._blocks, self._seen_shards = {}, [], set()
        self.refresh()
