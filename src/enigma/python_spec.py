"""A user's ``python:<module>:<factory>`` plug-in (an estimator, a knowledge base): parse the
spec, import the module, find the factory, call it, with every failure an error that names the
setting that gave the spec.

The user's own code runs here, so its failures are the user's input going wrong, not ours: a
module that raises on import or a factory that calls ``exit()`` becomes a ``ValueError`` (the CLI's
exit 2 with one line) instead of a traceback, or a silent exit with the plug-in's code. Target agents (``enigma.agents.python_agent``) load through here
too and word the two kinds of failure as the agents layer does.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable


class PluginSpecError(ValueError):
    """The spec is malformed, or names a module or factory that is not there or cannot be called so."""


class PluginFailed(ValueError):
    """The plug-in's own code raised or called exit(), importing its module or in its factory.
    ``detail`` says what failed without the setting, and ``in_factory`` whether the factory did
    (else the module's import): the agents layer words its message its own way."""

    def __init__(self, where: str, detail: str, in_factory: bool):
        super().__init__(f"{where}: {detail}")
        self.detail, self.in_factory = detail, in_factory


def _failed(exc: BaseException) -> str:
    return f"called exit({exc.code!r})" if isinstance(exc, SystemExit) else f"raised {type(exc).__name__}: {exc}"


def parse(spec: str, where: str) -> tuple[str, str]:
    """``(module, factory)`` of ``python:<module>:<factory>``; ``where`` names the setting."""
    body = spec[len("python:"):] if isinstance(spec, str) and spec.startswith("python:") else None
    module, _, factory = (body or "").rpartition(":")
    if not module or not factory.isidentifier():
        raise PluginSpecError(f"{where}: expected 'python:<module>:<factory>'")
    # a path or a relative name is no module an import can find (import_module raises TypeError on '..')
    if any(not part.isidentifier() for part in module.split(".")):
        raise PluginSpecError(f"{where}: {module!r} is not a dotted module name such as mypkg.plugins "
                         "(for a file, put its folder on PYTHONPATH and name the module)")
    return module, factory


def load_factory(spec: str, where: str) -> tuple[Callable[..., Any], str]:
    """The callable the spec names and its dotted name."""
    module_name, factory_name = parse(spec, where)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise PluginSpecError(f"{where}: cannot import module {module_name!r} ({exc})") from None
    except (Exception, SystemExit) as exc:  # the module's own code failed (or exited) on import
        raise PluginFailed(where, f"importing {module_name} {_failed(exc)}", in_factory=False) from exc
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise PluginSpecError(f"{where}: module {module_name!r} has no callable {factory_name!r}")
    return factory, f"{module_name}.{factory_name}"


def call_factory(factory: Callable[..., Any], name: str, where: str, **kwargs: Any) -> Any:
    """``factory(**kwargs)``; arguments it cannot take, or a failure inside it, name ``where``."""
    try:
        inspect.signature(factory).bind(**kwargs)
    except TypeError as exc:
        takes = f"({', '.join(kwargs)})" if kwargs else "with no arguments"
        raise PluginSpecError(f"{where}: the factory {name} must be callable {takes} ({exc})") from None
    except ValueError:  # no signature available (some builtins): just call it
        pass
    try:
        return factory(**kwargs)
    except (Exception, SystemExit) as exc:
        raise PluginFailed(where, f"{name}() {_failed(exc)}", in_factory=True) from exc
