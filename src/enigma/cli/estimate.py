"""``enigma estimate``: ENIGMA estimates of one or more target agents from an experience store.

Writes ``<out>/estimates.json`` (``{"targets": {name: {rating: {estimate, unnormalised, ess}}},
"diagnostics": {name: ...}}``), one learning-curve CSV per target under ``<out>/curves/`` and
one result file per target under ``<out>/targets/``; a rerun with the same settings reuses the
finished targets (so an interrupted run resumes).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import List, Optional

import typer

from enigma.cli.errors import USER_ERRORS, user_errors


def _register_errors() -> None:
    from enigma.ope.padding import PaddingError
    from enigma.ope.trainer import DiceDivergence
    from enigma.params import ParamsError
    from enigma.store.experience import StoreError

    for exc in (ParamsError, StoreError, PaddingError, DiceDivergence):
        if exc not in USER_ERRORS:
            USER_ERRORS.append(exc)


def _pairs(values: list[str], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        name, sep, rest = v.partition("=")
        if not sep or not name or not rest:
            raise ValueError(f"{option} {v!r}: expected NAME=VALUE")
        if name in out:
            raise ValueError(f"{option}: target name {name!r} given twice")
        out[name] = rest
    return out


def run_estimate(
    experience: Path,
    targets: dict[str, str],
    target_actions: dict[str, str],
    exclude_agents: list[str],
    out: Path,
    params: Path,
    preset: str | None = None,
    encoder: str | None = None,
    n_samples: int = 1,
    seed: int = 0,
    cache_dir: Path | None = None,
    progress: bool = True,
) -> dict:
    import pyarrow.parquet as pq

    from enigma.contracts import HeldOutAgent
    from enigma.ope import DiceConfig, EnigmaEstimator
    from enigma.params import ParamsError, load_params
    from enigma.store.experience import ExperienceStore

    both = set(targets) & set(target_actions)
    if both:
        raise ValueError(f"target {sorted(both)[0]!r} given both as --target and --target-actions")
    if not targets and not target_actions:
        raise ValueError("no target: give --target NAME=SPEC or --target-actions NAME=FILE")
    section = dict((load_params(params).get("dice") or {}) if params.is_file() else {})
    if preset:
        section["preset"] = preset
    if encoder:
        section["encoder"] = encoder
    try:
        cfg = DiceConfig.from_section(section)
    except ValueError as exc:
        raise ParamsError(f"{params}: section 'dice': {exc}") from exc
    if cfg.torch_threads:
        import torch

        torch.set_num_threads(cfg.torch_threads)
    store = ExperienceStore.open(experience)
    excluded = set(exclude_agents)
    unknown = excluded - set(store.agents())
    if unknown:
        raise ValueError(f"--exclude-agents: {sorted(unknown)} not agents of {experience} (have {store.agents()})")
    all_params = load_params(params) if params.is_file() else {}
    # Embeddings live where the encode stage keeps them, so a study re-encodes nothing.
    embed_dir = cache_dir / "embeddings" if cache_dir else ((all_params.get("encode") or {}).get("cache") or {}).get("cache_dir")
    from enigma.encoders.config import EncodeConfig

    try:
        encode = EncodeConfig.model_validate(all_params.get("encode") or {})
    except ValueError as exc:
        raise ParamsError(f"{params}: section 'encode': {exc}") from exc
    estimator = EnigmaEstimator(cfg, cache_dir=embed_dir, encode=encode, progress=progress)
    settings_hash = hashlib.blake2b(
        json.dumps([estimator.fingerprint(), str(experience.resolve()), sorted(excluded), n_samples, seed], sort_keys=True).encode(),
        digest_size=8,
    ).hexdigest()
    (out / "targets").mkdir(parents=True, exist_ok=True)
    (out / "curves").mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    for name in list(targets) + list(target_actions):
        done = out / "targets" / f"{name}.json"
        if done.is_file():
            prior = json.loads(done.read_text())
            if prior.get("settings") == settings_hash:
                results[name] = prior
                continue
        # The strict protocol: a target's own rated dialogues never inform its estimate.
        drop = excluded | ({name} & set(store.agents()))
        exp = store.filter_agents(drop=drop) if drop else store
        if name in targets:
            from enigma.sampling import sample_targets

            table = sample_targets(
                exp, targets[name], n_samples=n_samples, seed=seed,
                cache_dir=cache_dir / "samples" if cache_dir else "cache/samples", progress=progress,
            )
        else:
            path = Path(target_actions[name])
            if not path.is_file():
                raise FileNotFoundError(f"--target-actions {name}={path}: file not found")
            try:
                table = pq.read_table(path)
            except Exception as exc:  # pyarrow raises several types for corrupt files
                raise ValueError(f"--target-actions {name}={path}: not a readable Parquet file ({exc})") from exc
        result = estimator.estimate_full(exp, HeldOutAgent(name, target_actions=table))
        curve_rows = [dict(run=run, **row) for run, rows in result.curves.items() for row in rows]
        _write_csv(out / "curves" / f"{name}.csv", curve_rows)
        record = {
            "settings": settings_hash,
            "estimates": {r: {k: e[k] for k in ("estimate", "unnormalised", "ess")} for r, e in result.estimates.items()},
            "diagnostics": dict(result.diagnostics, excluded_agents=sorted(drop)),
        }
        record = _nan_to_null(record)  # a rating no dialogue has: null, never a bare NaN in JSON
        done.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n")
        results[name] = record
    summary = {
        "targets": {n: r["estimates"] for n, r in results.items()},
        "diagnostics": {n: r["diagnostics"] for n, r in results.items()},
    }
    (out / "estimates.json").write_text(json.dumps(_nan_to_null(summary), indent=2, allow_nan=False) + "\n")
    return summary


def _nan_to_null(obj):
    if isinstance(obj, float) and obj != obj:
        return None
    if isinstance(obj, dict):
        return {k: _nan_to_null(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_nan_to_null(v) for v in obj]
    return obj


def _write_csv(path: Path, rows: list[dict]) -> None:
    import csv

    if not rows:
        path.write_text("")
        return
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def register(app: typer.Typer) -> None:
    @app.command("estimate")
    @user_errors
    def estimate(
        experience: Path = typer.Option(..., "--experience", "-e", help="experience store directory"),
        target: List[str] = typer.Option([], "--target", "-t", help="NAME=AGENT_SPEC (repeatable); replies sampled"),
        target_actions: List[str] = typer.Option([], "--target-actions", help="NAME=PARQUET of sampled replies (repeatable)"),
        exclude_agents: str = typer.Option("", "--exclude-agents", help="comma-separated agents left out of the experience"),
        out: Path = typer.Option(..., "--out", "-o", help="output directory"),
        params: Path = typer.Option(Path("params.yaml"), help="parameters file (section 'dice')"),
        preset: Optional[str] = typer.Option(None, help="DICE preset (default, paper, dualdice, gendice, bestdice)"),
        encoder: Optional[str] = typer.Option(None, help="onehot, frozen or finetune (params: dice.encoder)"),
        n_samples: int = typer.Option(1, "--n-samples", "-n", help="target replies per logged state"),
        seed: int = typer.Option(0, help="sampling seed"),
        cache_dir: Optional[Path] = typer.Option(None, help="cache folder (embeddings, samples)"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bars"),
    ) -> None:
        """Estimate target agents' ratings with ENIGMA (DICE on the other agents' logs)."""
        _register_errors()
        summary = run_estimate(
            experience, _pairs(target, "--target"), _pairs(target_actions, "--target-actions"),
            [a for a in exclude_agents.split(",") if a.strip()], out, params, preset, encoder,
            n_samples, seed, cache_dir, progress=not quiet,
        )
        for name, ests in summary["targets"].items():
            typer.echo(name + ": " + ", ".join(
                f"{r}=" + ("n/a" if e["estimate"] is None else f"{e['estimate']:.4f}") + f" (ess {e['ess']:.0f})" for r, e in ests.items()
            ))
        typer.echo(f"wrote {out / 'estimates.json'}")
