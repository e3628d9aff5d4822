"""The ``python:<module>:<factory>`` kind: any object with ``respond`` from a factory."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from enigma import python_spec
from enigma.agents.errors import AgentSpecError, AgentUnavailable
from enigma.agents.fingerprint import tree_identity
from enigma.agents.spec import AgentSpec


def load_python_agent(spec: AgentSpec) -> Any:
    where = f"agent spec {spec.raw!r}"
    try:
        factory, name = python_spec.load_factory(f"python:{spec.target}", where)
        agent = python_spec.call_factory(factory, name, where)
    # a factory that raises is an agent that cannot run, not a crash of ours; one that calls
    # exit() would otherwise end the whole command with its code (0 for a bare exit()), saying nothing
    except python_spec.PluginFailed as exc:
        raise AgentUnavailable(f"agent {spec.raw}: {'its factory ' if exc.in_factory else ''}{exc.detail}") from exc
    except python_spec.PluginSpecError as exc:
        raise AgentSpecError(str(exc)) from exc
    if not callable(getattr(agent, "respond", None)):
        raise AgentSpecError(
            f"agent spec {spec.raw!r}: {name}() returned {type(agent).__name__}, "
            "which has no respond(history, n, seed) method"
        )
    return agent


def python_fingerprint_parts(spec: AgentSpec, agent: Any) -> dict[str, Any]:
    """The module's source (a code change may change the replies) plus whatever the agent
    reports about itself."""
    module_name = spec.target.rsplit(":", 1)[0]
    parts: dict[str, Any] = {}
    try:
        src = inspect.getsourcefile(importlib.import_module(module_name))
    except TypeError:  # built-in module
        src = None
    if src:
        from pathlib import Path

        parts["module"] = tree_identity(Path(src))
    cls_src = None
    try:
        cls_src = inspect.getsourcefile(type(agent))
    except TypeError:
        pass
    if cls_src and cls_src != src:
        from pathlib import Path

        parts["class"] = tree_identity(Path(cls_src))
    fn = getattr(agent, "fingerprint_parts", None)
    if callable(fn):
        parts["agent"] = fn()
    return parts
