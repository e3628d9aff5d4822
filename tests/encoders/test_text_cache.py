"""EmbeddingCache: correct vectors, hits and misses, resume after an interruption, sharing."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from enigma.encoders.text_cache import VECTORS, EmbeddingCache
from tests.conftest import REPO_ROOT

TEXTS = ["hello how can i help you today", "book a flight", "sorry no cheaper flight", "", "ok book it thanks bye"]


def _cache(model_dir, cache_dir, **kw) -> EmbeddingCache:
    return EmbeddingCache(str(model_dir), cache_dir, progress=False, **kw)


def test_vectors_are_normalised_mean_pooled_hidden_states(tiny_model_dir, tmp_path, tiny_tokenizer):
    from transformers import AutoModel

    cache = _cache(tiny_model_dir, tmp_path)
    out = cache.embed(TEXTS)
    assert out.shape == (5, 32) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    model = AutoModel.from_pretrained(tiny_model_dir).eval()
    for text, vec in zip(TEXTS, out):
        enc = tiny_tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            mean = model(**enc).last_hidden_state[0].mean(0)  # one sentence: no padding to mask
        np.testing.assert_allclose(vec, (mean / mean.norm()).numpy(), atol=1e-5)


def test_hits_are_not_re_encoded_and_order_is_kept(tiny_model_dir, tmp_path):
    cache = _cache(tiny_model_dir, tmp_path, batch_size=2)
    first = cache.embed(TEXTS[:3])
    assert cache.encoded_count == 3
    both = cache.embed([TEXTS[2], TEXTS[4], TEXTS[0], TEXTS[4]])  # one new text, repeated
    assert cache.encoded_count == 4
    np.testing.assert_array_equal(both[0], first[2])
    np.testing.assert_array_equal(both[2], first[0])
    np.testing.assert_array_equal(both[1], both[3])
    assert cache.embed([]).shape == (0, 32)
    # a rerun's plan when every text is cached: nothing to encode (the train stage's second run)
    assert cache.plan(TEXTS[:3]) == [] and cache.plan([]) == [] and cache.encode_batches([]) == 0
    # A fresh instance (e.g. the next held-out agent's process) finds everything on disk.
    again = _cache(tiny_model_dir, tmp_path)
    np.testing.assert_array_equal(again.embed(TEXTS[:3]), first)
    assert again.encoded_count == 0 and again._model is None  # the model was never loaded
    assert len(again) == 4


def test_resume_after_interruption_keeps_finished_shards(tiny_model_dir, tmp_path):
    texts = [f"flight number {i} to boston" for i in range(10)]
    cache = _cache(tiny_model_dir, tmp_path, batch_size=2, shard_size=4)
    real_batch = cache._encode_batch
    calls = {"n": 0}

    def interrupted(batch):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt  # the user pressed Ctrl-C during the fourth batch
        return real_batch(batch)

    cache._encode_batch = interrupted
    with pytest.raises(KeyboardInterrupt):
        cache.embed(texts)
    # one full shard (batches 1-2) and, written on the way out, the finished batch 3
    assert len(list(cache.dir.glob("shard-*.npz"))) == 2
    assert not list(cache.dir.glob(".tmp-*"))
    resumed = _cache(tiny_model_dir, tmp_path, batch_size=2)
    out = resumed.embed(texts)
    assert resumed.encoded_count == 4  # only the 4 texts not yet on disk
    reference = _cache(tiny_model_dir, tmp_path / "fresh").embed(texts)
    np.testing.assert_allclose(out, reference, atol=1e-6)


def test_concurrent_instances_see_each_others_shards_and_compact(tiny_model_dir, tmp_path):
    a = _cache(tiny_model_dir, tmp_path)
    b = _cache(tiny_model_dir, tmp_path)
    assert len(b) == 0
    va = a.embed(TEXTS[:2])
    vb = b.embed(TEXTS[:3])  # b picks up a's shard before deciding what to encode
    assert b.encoded_count == 1
    np.testing.assert_array_equal(vb[:2], va)
    b.compact()
    assert len(list(b.dir.glob("shard-*.npz"))) == 1
    c = _cache(tiny_model_dir, tmp_path)
    np.testing.assert_array_equal(c.embed(TEXTS[:3]), vb)
    assert c.encoded_count == 0


def test_namespace_depends_on_model_and_settings(tiny_model_dir, tmp_path):
    assert _cache(tiny_model_dir, tmp_path).dir != _cache(tiny_model_dir, tmp_path, max_length=16).dir
    assert _cache(tiny_model_dir, tmp_path).dir != EmbeddingCache("minilm", tmp_path, progress=False).dir
    # the recipe is in it: vectors of the old recipe (padded to the batch) are never mixed in
    assert json.loads((_cache(tiny_model_dir, tmp_path).dir / "settings.json").read_text())["vectors"] == VECTORS


def test_bad_input_is_named(tiny_model_dir, tmp_path):
    cache = _cache(tiny_model_dir, tmp_path)
    with pytest.raises(TypeError, match="item 1 is NoneType, expected str"):
        cache.embed(["ok", None])  # type: ignore[list-item]
    cache.embed(["ok"])
    shard = next(cache.dir.glob("shard-*.npz"))
    shard.write_bytes(b"garbage")
    with pytest.raises(RuntimeError, match=f"shard {shard} is unreadable.*delete it"):
        _cache(tiny_model_dir, tmp_path).embed(["ok"])


@pytest.mark.slow
def test_real_minilm_similarity(tmp_path):
    torch.set_num_threads(1)
    cache = EmbeddingCache("minilm", tmp_path, progress=False)
    v = cache.embed(["I want to book a flight to Boston.", "Please book me a plane ticket to Boston.", "The cat sat on the mat."])
    assert v.shape == (3, 384)
    assert v[0] @ v[1] > 0.6 > v[0] @ v[2]


def _varied_texts(n: int = 48) -> list[str]:
    words = "i would like to book a cheap flight from boston to denver on the third of may please".split()
    return [" ".join(words[(3 * i) % len(words):][: 1 + (7 * i) % 15]) + f" {i}" for i in range(n)]


def test_a_texts_vector_does_not_depend_on_its_batch_or_threads(tmp_path):
    """Issue 73: vectors padded to the batch's longest text changed in their last bits with the
    batch, so a cache filled in another order (a fresh clone) made other estimates. Real MiniLM,
    texts of many lengths: alone on one thread, and in mixed batches (embed's and arbitrary ones)
    on two threads, every vector is the same to the bit."""
    texts = _varied_texts()
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = EmbeddingCache("minilm", tmp_path / "a", progress=False)
        one_by_one = np.stack([alone.embed([t])[0] for t in texts])
        torch.set_num_threads(2)
        batched = EmbeddingCache("minilm", tmp_path / "b", progress=False, batch_size=16).embed(texts[::-1])[::-1]
        mixed = EmbeddingCache("minilm", tmp_path / "c", progress=False)
        mixed._load_model()
        arbitrary = np.concatenate([mixed._encode_batch(texts[i:i + 5]) for i in range(0, len(texts), 5)])
    finally:
        torch.set_num_threads(before)
    assert one_by_one.tobytes() == batched.tobytes() == arbitrary.tobytes()


def test_a_deep_copy_shares_the_cache(tiny_model_dir, tmp_path):
    import copy

    cache = _cache(tiny_model_dir, tmp_path)
    cache.embed(["ok"])  # the model is loaded now
    assert copy.deepcopy(cache) is cache


@pytest.mark.slow
def test_several_processes_share_one_cache(tiny_model_dir, tmp_path):
    import subprocess
    import sys

    script = (
        "import sys, torch; torch.set_num_threads(1)\n"
        "from enigma.encoders.text_cache import EmbeddingCache\n"
        "c = EmbeddingCache(sys.argv[1], sys.argv[2], progress=False, batch_size=3, shard_size=3)\n"
        "c.embed([f'flight {i} to boston' for i in range(int(sys.argv[3]), int(sys.argv[3]) + 12)])\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(tiny_model_dir), str(tmp_path), start])
        for start in ("0", "6")  # overlapping texts 6..11, written by both at the same time
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    reader = _cache(tiny_model_dir, tmp_path)
    texts = [f"flight {i} to boston" for i in range(18)]
    out = reader.embed(texts)
    assert reader.encoded_count == 0 and len(reader) == 18
    np.testing.assert_allclose(out, _cache(tiny_model_dir, tmp_path / "fresh").embed(texts), atol=1e-6)


def _embed_in_a_process(model_dir: str, cache_dir: str, which: int, texts: list[str], start, out) -> None:
    torch.set_num_threads(1)
    cache = EmbeddingCache(model_dir, cache_dir, progress=False, batch_size=2, shard_size=2)
    start.wait()  # every writer at once
    out.put((which, cache.embed(texts).tolist()))


def test_separate_processes_writing_one_cache_at_once_lose_and_damage_nothing(tiny_model_dir, tmp_path):
    """The embedding cache is shared by path between worker processes (a Dask cluster's, the
    train stage's): writers of overlapping texts at the same moment each write whole shards under
    their own names, and a reader afterwards finds every text, with the vectors each writer got."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    texts = [f"sentence number {i} about flights" for i in range(24)]
    parts = [texts[:16], texts[8:], texts[::2]]  # overlapping: several writers encode the same texts
    start, out = ctx.Barrier(len(parts)), ctx.Queue()
    procs = [ctx.Process(target=_embed_in_a_process, args=(str(tiny_model_dir), str(tmp_path), i, p, start, out))
             for i, p in enumerate(parts)]
    for p in procs:
        p.start()
    got = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    reader = _cache(tiny_model_dir, tmp_path)
    assert len(reader) == len(texts) and not list(reader.dir.glob(".tmp-*"))
    alone = reader.embed(texts)
    assert reader.encoded_count == 0
    vectors = {t: v for i, part in enumerate(parts) for t, v in zip(part, got[i])}
    np.testing.assert_allclose(np.array([vectors[t] for t in texts]), alone, atol=1e-6)


def test_results_made_from_another_recipes_vectors_are_not_reused(monkeypatch):
    """A result's fingerprint names the vectors' recipe for every estimator that reads the cache
    (ENIGMA on the frozen encoder, a comparator with an embedder), and for no other."""
    from enigma.encoders import text_cache
    from enigma.estimators import build_estimator
    from enigma.evaluation.fingerprints import estimator_fingerprint
    from enigma.params import Params

    params = Params.load(REPO_ROOT / "params.yaml")
    names = ["enigma", "adem", "experience-mean"]
    before = {n: estimator_fingerprint(build_estimator(n, params)) for n in names}
    monkeypatch.setattr(text_cache, "VECTORS", text_cache.VECTORS + 1)
    after = {n: estimator_fingerprint(build_estimator(n, params)) for n in names}
    assert before["enigma"] != after["enigma"] and before["adem"] != after["adem"]
    assert before["experience-mean"] == after["experience-mean"]
