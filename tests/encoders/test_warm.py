"""The encode stage: the store's utterances and the sampled replies end up in the cache."""

from __future__ import annotations

import pyarrow as pa
import pytest

from enigma.encoders.text_cache import EmbeddingCache
from enigma.encoders.warm import target_texts, warm_cache
from enigma.store import schema as S
from enigma.store.experience import ExperienceStore


def _store() -> ExperienceStore:
    turns = pa.table(
        {
            "dialog_id": ["a", "a", "b", "b"],
            "turn_index": pa.array([0, 1, 0, 1], pa.int32()),
            "role": ["user", "agent", "user", "agent"],
            "text": ["hello", "how can i help", "", "how can i help"],
        },
        schema=S.TURNS_SCHEMA,
    )
    dialogues = pa.table({"dialog_id": ["a", "b"], "agent_id": ["x", "y"]})
    return ExperienceStore(dialogues, turns)


def _targets(texts, errors) -> pa.Table:
    n = len(texts)
    return pa.table({"dialog_id": ["a"] * n, "turn_index": [1] * n, "sample_index": list(range(n)), "text": texts, "error": errors})


def test_warm_then_everything_is_a_hit(tiny_model_dir, tmp_path):
    cache = EmbeddingCache(str(tiny_model_dir), tmp_path, progress=False)
    targets = _targets(["book a flight", None, "hello"], [None, "timeout", None])
    stats = warm_cache(cache, _store(), [("agent-z", targets)])
    assert stats.texts == 3 and stats.newly_encoded == 3  # hello, how can i help, book a flight
    again = warm_cache(EmbeddingCache(str(tiny_model_dir), tmp_path, progress=False), _store(), [("agent-z", targets)])
    assert again.newly_encoded == 0


def test_malformed_targets_are_named():
    with pytest.raises(ValueError, match="agent-z: row 1: field 'text' is NoneType but 'error' is empty"):
        target_texts(_targets(["ok", None], [None, None]), "agent-z")
    with pytest.raises(ValueError, match="agent-z: no 'text' column"):
        target_texts(pa.table({"reply": ["x"]}), "agent-z")


def test_encode_command(tiny_model_dir, tmp_path):
    import json

    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from enigma.cli import app

    store_dir = _store().write(tmp_path / "store")
    pq.write_table(_targets(["book a flight"], [None]), tmp_path / "t.parquet")
    args = ["encode", "-e", str(store_dir), "-t", str(tmp_path / "t.parquet"), "--model", str(tiny_model_dir),
            "--cache-dir", str(tmp_path / "emb"), "--no-progress", "--params", str(tmp_path / "none.yaml")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "none.yaml: parameters file not found" in result.output
    (tmp_path / "p.yaml").write_text("encode:\n  model: minilm\n")
    args[-1] = str(tmp_path / "p.yaml")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = result.output  # transformers' loading bar (stderr) may share the line
    stats = json.loads(out[out.index("{") : out.rindex("}") + 1])
    assert stats["newly_encoded"] == 3 and stats["texts"] == 3
    result = CliRunner().invoke(app, args[:3] + ["-t", str(tmp_path / "missing.parquet")] + args[5:])
    assert result.exit_code == 2 and "missing.parquet: targets not found" in result.output


def test_worker_processes_fill_the_cache_as_one_process_does(tiny_model_dir, tmp_path):
    """The train stage's encode step shares the batches out among its worker processes (one torch
    thread each): the cache ends with the same texts and the same vectors, bit for bit, as one
    process's embed(), and a second pass encodes nothing."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from enigma.encoders.config import CacheConfig, EncodeConfig
    from enigma.encoders.warm import encode_in_pool
    from enigma.pipeline.workers import init_worker

    texts = [f"reply number {i} " + "word " * (i % 7) for i in range(23)] + ["hello", "hello", "how can i help"]
    one = EmbeddingCache(str(tiny_model_dir), tmp_path / "one", batch_size=4, progress=False)
    expected = one.embed(texts)
    settings = EncodeConfig(model=str(tiny_model_dir), cache=CacheConfig(cache_dir=str(tmp_path / "pool"), batch_size=4, shard_size=5))
    shared = settings.embedding_cache()
    plan = shared.plan(texts)
    # 25 distinct texts, each once, at most 4 to a batch and one padded length to a batch
    assert sorted(t for b in plan for t in b) == sorted(set(texts)) and max(len(b) for b in plan) == 4
    assert all(len({shared._padded(len(i)) for i in shared._token_ids(b)}) == 1 for b in plan)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"), initializer=init_worker) as pool:
        assert encode_in_pool(shared, texts, settings, pool, 2) == 25
        assert encode_in_pool(shared, texts, settings, pool, 2) == 0
    assert len(shared) == 25 and shared.encoded_count == 0  # the workers encoded, not this process
    assert shared.embed(texts).tobytes() == expected.tobytes()
    assert len(list((tmp_path / "pool" / shared.namespace).glob("shard-*.npz"))) >= 2  # each worker wrote its own
