"""Turning the library's expected errors into one clear line and exit code 2, never a
traceback. Unexpected exceptions still raise, so real bugs stay visible."""

from __future__ import annotations

import functools
import sys
from typing import Callable, TypeVar

import typer

F = TypeVar("F", bound=Callable)

# Error types that carry a user-facing message (file, record, field). Stage modules add theirs.
USER_ERRORS: list[type[BaseException]] = [FileNotFoundError, ValueError]


def user_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except tuple(USER_ERRORS) as exc:
            typer.echo(f"error: {exc}", err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]
