"""``enigma serve`` (any agent as an OpenAI-compatible endpoint) and ``enigma sample``
(target-action sampling into the cache and one Parquet table)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from enigma.cli.errors import USER_ERRORS, agent_exits, user_errors
from enigma.cli.options import PARAMS_HELP, check_out, load_params


def _register_errors() -> None:
    from enigma.agents.errors import AgentUnavailable
    from enigma.params import ParamsError
    from enigma.store.experience import StoreError

    for err in (ParamsError, StoreError, AgentUnavailable):
        if err not in USER_ERRORS:
            USER_ERRORS.append(err)


def register(app: typer.Typer) -> None:
    _register_errors()

    @app.command("serve")
    @user_errors
    def serve_cmd(
        spec: str = typer.Argument(..., help="agent spec, e.g. python:enigma.sim.sellers:<id> or hf:<dir>"),
        port: int = typer.Option(8000, "--port", "-p", help="port on the host (1 to 65535)"),
        host: str = typer.Option("127.0.0.1", help="interface to listen on (local only by default; "
                                 "any other without --api-key-env gets a warning)"),
        model_name: Optional[str] = typer.Option(None, "--model-name", help="name reported by /v1/models (default: the spec, "
                                                 "credentials in a URL hidden)"),
        api_key_env: Optional[str] = typer.Option(
            None, "--api-key-env", help="require the key held in this environment variable as a Bearer token"
        ),
        params: Optional[Path] = typer.Option(None, "--params", help=f"{PARAMS_HELP} (sections 'sample.agents' and 'serve')"),
    ):
        """Expose an agent as an OpenAI-compatible /v1/chat/completions endpoint."""
        from enigma.agents import load_agent, shown_spec
        from enigma.agents.apikey import read_api_key
        from enigma.agents.serve_access import check_bind
        from enigma.agents.server import serve

        p = load_params(params)
        cfg, serve_cfg = p.sample, p.serve
        api_key = None
        if api_key_env:
            api_key = read_api_key(api_key_env).get()
            if not api_key:
                raise ValueError(f"--api-key-env {api_key_env}: that environment variable is not set (or blank)")
        local = check_bind(host, port)  # before the agent loads, which can take a while
        if not local and not api_key:
            typer.echo(f"warning: --host {host} listens beyond this machine and no --api-key-env is set: anyone "
                       "who can reach it can call the agent (set --api-key-env VAR to require a key)", err=True)
        agent = load_agent(spec, cfg.agents)
        serve(agent, model_name or shown_spec(spec), host=host, port=port, api_key=api_key, settings=serve_cfg)

    @app.command("sample")
    @user_errors
    def sample_cmd(
        store: Path = typer.Argument(..., help="experience store directory"),
        spec: str = typer.Argument(..., help="agent spec of the target agent"),
        out: Optional[Path] = typer.Option(None, "--out", "-o", help="Parquet file for the sampled replies"),
        n_samples: Optional[int] = typer.Option(None, "--n-samples", "-n", help="replies per state (params: sample.n_samples)"),
        seed: Optional[int] = typer.Option(None, help="sampling seed (params: sample.seed)"),
        cache_dir: Optional[Path] = typer.Option(None, help="sample cache (params: sample.cache_dir)"),
        exclude_agent: List[str] = typer.Option([], "--exclude-agent", "-x", help="skip this agent's dialogues (repeatable)"),
        params: Optional[Path] = typer.Option(None, "--params", help=f"{PARAMS_HELP} (section 'sample')"),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="show a progress bar"),
        quiet: bool = typer.Option(False, "--quiet", "-q", hidden=True, help="the same as --no-progress"),
    ):
        """Sample the target agent's replies at every logged agent turn of a store (cached, resumable)."""
        from enigma.sampling.sampler import run_sampling

        cfg = load_params(params).sample
        if out is not None:
            check_out(out, "--out", folder=False)
        check_out(Path(cache_dir or cfg.cache_dir), "--cache-dir" if cache_dir else "sample.cache_dir", folder=True)
        n = n_samples if n_samples is not None else cfg.n_samples
        s = seed if seed is not None else cfg.seed
        options = dict(cfg.run_options(), n_samples=n, seed=s, cache_dir=cache_dir or cfg.cache_dir)
        with agent_exits(spec):
            table, stats = run_sampling(store, spec, exclude_agents=exclude_agent, progress=progress and not quiet, **options)
        from enigma.writes import naming, write_parquet

        if out is None:
            out = Path(cache_dir or cfg.cache_dir) / stats.agent_fingerprint / f"targets-n{n}-seed{s}.parquet"
        with naming(out.parent):
            out.parent.mkdir(parents=True, exist_ok=True)
        write_parquet(out, table)  # beside it, then renamed over it: a failed write keeps what was there
        n_err = table.num_rows - table.column("error").null_count
        summary = {"out": str(out), "rows": table.num_rows, "failed_samples": n_err, **stats.as_dict()}
        label = (table.schema.metadata or {}).get(b"enigma.sampling.approximation")
        if label:
            summary["approximation"] = label.decode()
        typer.echo(json.dumps(summary))
