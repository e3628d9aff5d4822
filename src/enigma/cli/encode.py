"""``enigma encode --experience <store> [--targets <parquet>] ...``: fill the embedding cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from enigma.cli.errors import USER_ERRORS, user_errors
from enigma.cli.options import PARAMS_HELP, load_params


def _register_errors() -> None:
    from enigma.encoders.weights import WeightsError
    from enigma.params import ParamsError
    from enigma.store.experience import StoreError

    for err in (ParamsError, WeightsError, StoreError):
        if err not in USER_ERRORS:
            USER_ERRORS.append(err)


def _read_targets(path: Path):
    import pyarrow.parquet as pq

    if not path.exists():
        raise FileNotFoundError(f"{path}: targets not found (expected a Parquet file or a folder of them)")
    try:
        return pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for unreadable input
        raise ValueError(f"{path}: not a readable Parquet table of sampled targets ({exc})") from exc


def encode_command(
    experience: Optional[Path] = typer.Option(None, "--experience", "-e", help="experience store directory"),
    targets: List[Path] = typer.Option([], "--targets", "-t", help="sampled targets (Parquet file or folder); repeatable"),
    model: Optional[str] = typer.Option(None, "--model", help="minilm | mpnet | a local Hugging Face directory"),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="embedding cache directory"),
    params: Optional[Path] = typer.Option(None, "--params", help=f"{PARAMS_HELP} (section 'encode')"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="show a progress bar"),
) -> None:
    """Encode every utterance of a store and every sampled target reply not cached yet, so a
    leave-one-agent-out study only looks vectors up. Safe to interrupt and rerun."""
    _register_errors()
    from enigma.encoders.config import CacheConfig
    from enigma.encoders.warm import warm_cache
    from enigma.store.experience import ExperienceStore

    if experience is None and not targets:
        raise ValueError("nothing to encode: give --experience and/or --targets")
    cfg = load_params(params).encode
    if cache_dir is not None:
        cfg = cfg.model_copy(update={"cache": CacheConfig(**{**cfg.cache.model_dump(), "cache_dir": str(cache_dir)})})
    store = ExperienceStore.open(experience) if experience is not None else None
    tables = [(str(t), _read_targets(t)) for t in targets]
    stats = warm_cache(cfg.embedding_cache(model, progress=progress), store, tables)
    typer.echo(json.dumps(stats.as_dict()))


def register(app: typer.Typer) -> None:
    app.command("encode")(user_errors(encode_command))
