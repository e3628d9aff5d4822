"""Errors of the agents layer. Each message names the spec, file or state at fault."""

from __future__ import annotations


class AgentSpecError(ValueError):
    """A spec string is malformed, names an unknown kind, or points at something missing."""


class AgentCallError(RuntimeError):
    """One call to an agent failed (server down, garbage answer, empty reply). The sampler
    records it for that state and carries on."""


class AgentUnavailable(RuntimeError):
    """The agent cannot be used at all: its factory raised, or its calls fail one after the
    other (a server that is down). Every command reports it the same way: one line that names
    the agent spec, and exit code 2."""
