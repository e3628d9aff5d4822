"""The ``enigma`` command. Each stage's commands live in their own module here and are
registered through ``register(app)``; heavy imports stay inside the command bodies so that
``enigma --help`` starts fast."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="enigma",
    help="ENIGMA: estimate dialogue agents' human ratings from logged, rated conversations.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

# Modules under enigma.cli, one per stage; each defines register(app).
COMMAND_MODULES = [
    "ingest",
    "agents",
    "report",
    "estimate",
    "simulate",
    "encode",
    "stage",
]

for _name in COMMAND_MODULES:
    importlib.import_module(f"enigma.cli.{_name}").register(app)


def main() -> None:  # pragma: no cover - console entry
    app()
