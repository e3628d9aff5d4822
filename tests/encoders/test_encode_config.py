"""The encode section of params.yaml builds the encoders."""

from __future__ import annotations

import pytest

from enigma.encoders.frozen import FrozenPairEncoder
from enigma.params import Params, ParamsError
from tests.conftest import REPO_ROOT


def test_project_params_validate():
    cfg = Params.load(REPO_ROOT / "params.yaml").encode
    assert cfg.model == "minilm" and cfg.frozen.position_buckets >= 1


def test_bad_value_names_section_and_field(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("encode:\n  cache:\n    batch_size: 0\n")
    with pytest.raises(ParamsError, match="(?s)section .encode.*cache.batch_size"):
        Params.load(p)
    p.write_text("encode:\n  frozen:\n    buckets: 3\n")
    with pytest.raises(ParamsError, match="(?s)section .encode.*frozen.buckets"):
        Params.load(p)


def test_builds_frozen_encoder(tmp_path, tiny_model_dir):
    p = tmp_path / "params.yaml"
    p.write_text(f"encode:\n  model: {tiny_model_dir}\n  cache: {{cache_dir: {tmp_path / 'emb'}}}\n  frozen: {{position_buckets: 3, projection_dim: 5}}\n")
    enc = Params.load(p).encode.frozen_encoder()
    assert isinstance(enc, FrozenPairEncoder) and enc.dim == 5 and enc.position_buckets == 3
    assert enc.cache.dir.parent == tmp_path / "emb"
    fin = Params.load(p).encode.finetune_encoder()
    assert fin.dim == 32 and fin.max_utterance_tokens == 64
