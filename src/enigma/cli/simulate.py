"""``enigma simulate --preset <name> --out <dir> --seed <n>``: the airline simulator's data."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from enigma.cli.errors import USER_ERRORS, user_errors
from enigma.cli.options import PARAMS_HELP, check_out, load_params


def _register_errors() -> None:
    from enigma.params import ParamsError

    if ParamsError not in USER_ERRORS:
        USER_ERRORS.append(ParamsError)


def simulate_command(
    out: Path = typer.Option(..., "--out", "-o", help="directory for the store and truth.parquet"),
    preset: Optional[str] = typer.Option(None, "--preset", help="agent family: airline24 (default), rule6 or airline-heldout (test only)"),
    seed: Optional[int] = typer.Option(None, "--seed", help="seed of every dialogue (same seed, same bytes)"),
    dialogues_per_agent: Optional[int] = typer.Option(None, "--dialogues-per-agent", help="experience dialogues per agent"),
    truth_rollouts: Optional[int] = typer.Option(None, "--truth-rollouts", help="minimum on-policy rollouts per agent for the truth"),
    truth: Optional[Path] = typer.Option(None, "--truth", help="where to write the truth table (default <out>/truth.parquet)"),
    params: Optional[Path] = typer.Option(None, "--params", help=f"{PARAMS_HELP} (section 'simulate')"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="show a progress bar"),
    list_agents: bool = typer.Option(False, "--list-agents", help="print the preset's agents and exit"),
) -> None:
    """Roll out every agent of a preset against the simulated customer: the rated experience
    data (canonical store) and each agent's true value per rating (truth.parquet)."""
    _register_errors()
    from enigma.sim.generate import generate
    from enigma.sim.seller_presets import PRESETS
    from enigma.sim.sellers import agent_spec

    p = load_params(params)
    cfg = p.with_overrides("simulate", preset=preset, seed=seed, dialogues_per_agent=dialogues_per_agent,
                           truth_rollouts=truth_rollouts)
    if list_agents:
        for agent_id, knobs in PRESETS[cfg.preset].items():
            typer.echo(f"{agent_spec(agent_id):45s} {knobs.description}")
        return
    check_out(out, "--out", folder=True)
    summary = generate(cfg, out, truth_path=truth, progress=progress)
    typer.echo(
        f"wrote {out}: {summary['n_dialogues']:,} dialogues of {summary['n_agents']} agents ({cfg.preset}, seed {cfg.seed}); "
        f"{summary['truth']}: true reward {summary['reward_min']:.3f} .. {summary['reward_max']:.3f}, "
        f"largest standard error {summary['max_stderr']:.4f}"
    )


def register(app: typer.Typer) -> None:
    app.command("simulate")(user_errors(simulate_command))
