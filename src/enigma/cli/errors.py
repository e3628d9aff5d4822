"""Turning the library's expected errors into one clear line and exit code 2, never a
traceback. Unexpected exceptions still raise, so real bugs stay visible. The line never shows
credentials written into a URL (``enigma.redaction``), whichever layer wrote the message."""

from __future__ import annotations

import contextlib
import functools
import sys
from typing import Callable, Iterator, TypeVar

import typer

from enigma.redaction import redact_userinfo
from enigma.writes import WriteFailed, is_disk_error, reason

F = TypeVar("F", bound=Callable)

# Error types that carry a user-facing message (file, record, field). Stage modules add theirs.
USER_ERRORS: list[type[BaseException]] = [FileNotFoundError, ValueError, WriteFailed]


def user_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except tuple(USER_ERRORS) as exc:
            typer.echo(f"error: {redact_userinfo(str(exc))}", err=True)
            sys.exit(2)
        except OSError as exc:
            # a full disk (a quota, a size limit, a read-only mount) where no write names its path
            # (enigma.writes does where it can): still the user's disk, not a bug of ours
            if not is_disk_error(exc):
                raise
            typer.echo(f"error: {exc.filename or 'a file being written'}: cannot write it ({reason(exc)})", err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


@contextlib.contextmanager
def agent_exits(spec: str) -> Iterator[None]:
    """Around the calls to agent ``spec``: its code calling exit() is an unusable agent, named
    (a bare exit() would end the command with 0 and say nothing)."""
    try:
        yield
    except SystemExit as exc:
        from enigma.agents.errors import AgentUnavailable

        raise AgentUnavailable(f"agent {redact_userinfo(spec)}: its code called exit({exc.code!r})") from exc
