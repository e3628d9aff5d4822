"""The randomly initialised encoder of the ENIGMA ablation: seeded, the base's architecture and
tokenizer, and an embedding-cache namespace of its own (never mixed with the trained model's)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from enigma.encoders.text_cache import EmbeddingCache
from enigma.encoders.weights import RANDOM_MARKER, WeightsError, model_fingerprint, parse_random, resolve_weights


def test_parse_random():
    assert parse_random("random:minilm") == ("minilm", 0)
    assert parse_random("random:minilm:3") == ("minilm", 3)
    assert parse_random("random:/models/a:b") == ("/models/a:b", 0)
    with pytest.raises(WeightsError, match="expected 'random:<model"):
        parse_random("random:")


def test_random_minilm_is_seeded_and_cached_apart(tmp_path):
    d0 = resolve_weights("random:minilm:0", cache_dir=tmp_path / "w")
    again = resolve_weights("random:minilm:0", cache_dir=tmp_path / "w")
    other_root = resolve_weights("random:minilm:0", cache_dir=tmp_path / "w2")  # rebuilt from the seed
    d1 = resolve_weights("random:minilm:1", cache_dir=tmp_path / "w")
    real = resolve_weights("minilm")
    assert d0 == again
    assert model_fingerprint(d0) == model_fingerprint(other_root)
    assert len({model_fingerprint(d0), model_fingerprint(d1), model_fingerprint(real)}) == 3
    assert json.loads((d0 / "config.json").read_text())[RANDOM_MARKER]["seed"] == 0

    texts = ["I would like to book a flight.", "What is your name?"]
    rand = EmbeddingCache(d0, tmp_path / "emb", progress=False)
    trained = EmbeddingCache("minilm", tmp_path / "emb", progress=False)
    assert rand.namespace != trained.namespace
    a, b = rand.embed(texts), trained.embed(texts)
    assert a.shape == b.shape
    assert not np.allclose(a, b, atol=1e-3)
    assert rand.encoded_count == 2 and trained.encoded_count == 2  # neither was served the other's vectors


def _built(name: str):
    """The estimator as the repository's params.yaml names it."""
    from enigma.estimators import build_estimator
    from enigma.params import Params
    from tests.conftest import REPO_ROOT

    return build_estimator(name, Params.load(REPO_ROOT / "params.yaml"))


def test_enigma_random_encoder_is_enigma_with_the_random_model():
    enigma, ablation = _built("enigma"), _built("enigma-random-encoder")
    assert ablation.name == "enigma-random-encoder"
    assert ablation.config.features.encoder_model == f"random:{enigma.config.features.encoder_model}:{enigma.config.seed}"
    # the ablation skips the bootstrap interval (its point is the encoder, and intervals cost 100 refits)
    assert ablation.config.interval.resamples == 0
    # it ran on top of the mean of 5 fitted Qs and keeps them (its pair, that default's row, is the lab's
    # enigma-fqe-ensemble5): otherwise it is enigma
    assert ablation.config.value.fqe.ensemble == 5 and enigma.config.value.fqe.ensemble == 2
    assert ablation.config.with_flat(encoder_model=enigma.config.features.encoder_model, fqe=enigma.config.value.fqe,
                                     interval_resamples=enigma.config.interval.resamples) == enigma.config


def test_enigma_gda_is_enigma_solved_by_gradient_descent_ascent():
    enigma, gda = _built("enigma"), _built("enigma-gda")
    assert gda.name == "enigma-gda" and gda.config.solver.name == "gda" and enigma.config.solver.name == "exact_nu"
    # the same features: only the solver's settings differ
    for field in ("tmax", "encoder", "encoder_model", "project_dim", "head_hidden", "agreement", "seed"):
        assert gda.config.flat().get(field, 0) == enigma.config.flat().get(field, 0), field  # exact_nu's heads: 0 by construction
    assert gda.config.features == enigma.config.features.model_copy(update={"grounding": False, "reply_measures": False})
    assert gda.fingerprint() != enigma.fingerprint()
