"""The ``python:<module>:<factory>`` kind: any object with ``respond`` from a factory."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from enigma.agents.errors import AgentSpecError, AgentUnavailable
from enigma.agents.fingerprint import tree_identity
from enigma.agents.spec import AgentSpec


def _failed(exc: BaseException) -> str:
    return f"called exit({exc.code!r})" if isinstance(exc, SystemExit) else f"raised {type(exc).__name__}: {exc}"


def load_python_agent(spec: AgentSpec) -> Any:
    module_name, factory_name = spec.target.rsplit(":", 1)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise AgentSpecError(f"agent spec {spec.raw!r}: cannot import module {module_name!r} ({exc})") from exc
    except (Exception, SystemExit) as exc:  # the module's own code failed (or exited) on import
        raise AgentUnavailable(f"agent {spec.raw}: importing {module_name} {_failed(exc)}") from exc
    factory = getattr(module, factory_name, None)
    if factory is None:
        raise AgentSpecError(f"agent spec {spec.raw!r}: module {module_name!r} has no attribute {factory_name!r}")
    if not callable(factory):
        raise AgentSpecError(f"agent spec {spec.raw!r}: {module_name}.{factory_name} is not callable")
    try:
        inspect.signature(factory).bind()
    except TypeError as exc:
        raise AgentSpecError(
            f"agent spec {spec.raw!r}: the factory must be callable with no arguments ({exc})"
        ) from exc
    except ValueError:  # no signature available (some builtins): just try it
        pass
    try:
        agent = factory()
    # a factory that raises is an agent that cannot run, not a crash of ours; one that calls
    # exit() would otherwise end the whole command with its code (0 for a bare exit()), saying nothing
    except (Exception, SystemExit) as exc:
        raise AgentUnavailable(f"agent {spec.raw}: its factory {module_name}.{factory_name}() {_failed(exc)}") from exc
    if not callable(getattr(agent, "respond", None)):
        raise AgentSpecError(
            f"agent spec {spec.raw!r}: {module_name}.{factory_name}() returned {type(agent).__name__}, "
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
