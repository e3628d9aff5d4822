"""A user's ``python:<module>:<factory>`` plug-in (an estimator, a knowledge base): parse the
spec, import the module, find the factory, call it, with every failure an error that names the
setting that gave the spec.

The user's own code runs here, so its failures are the user's input going wrong, not ours: a
module that raises on import or a factory that calls ``exit()`` becomes a ``ValueError`` (the CLI's
exit 2 with one line) instead of a traceback, or a silent exit with the plug-in's code.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable


def _failed(exc: BaseException) -> str:
    return f"called exit({exc.code!r})" if isinstance(exc, SystemExit) else f"raised {type(exc).__name__}: {exc}"


def parse(spec: str, where: str) -> tuple[str, str]:
    """``(module, factory)`` of ``python:<module>:<factory>``; ``where`` names the setting."""
    body = spec[len("python:"):] if isinstance(spec, str) and spec.startswith("python:") else None
    module, _, factory = (body or "").rpartition(":")
    if not module or not factory.isidentifier():
        raise ValueError(f"{where}: expected 'python:<module>:<factory>'")
    # a path or a relative name is no module an import can find (import_module raises TypeError on '..')
    if any(not part.isidentifier() for part in module.split(".")):
        raise ValueError(f"{where}: {module!r} is not a dotted module name such as mypkg.estimators "
                         "(for a file, put its folder on PYTHONPATH and name the module)")
    return module, factory


def load_factory(spec: str, where: str) -> tuple[Callable[..., Any], str]:
    """The callable the spec names and its dotted name."""
    module_name, factory_name = parse(spec, where)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ValueError(f"{where}: cannot import module {module_name!r} ({exc})") from None
    except (Exception, SystemExit) as exc:  # the module's own code failed (or exited) on import
        raise ValueError(f"{where}: importing {module_name} {_failed(exc)}") from exc
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise ValueError(f"{where}: module {module_name!r} has no callable {factory_name!r}")
    return factory, f"{module_name}.{factory_name}"


def call_factory(factory: Callable[..., Any], name: str, where: str, **kwargs: Any) -> Any:
    """``factory(**kwargs)``; arguments it cannot take, or a failure inside it, name ``where``."""
    try:
        inspect.signature(factory).bind(**kwargs)
    except TypeError as exc:
        takes = f"({', '.join(kwargs)})" if kwargs else "with no arguments"
        raise ValueError(f"{where}: the factory {name} must be callable {takes} ({exc})") from None
    except ValueError:  # no signature available (some builtins): just call it
        pass
    try:
        return factory(**kwargs)
    except (Exception, SystemExit) as exc:
        raise ValueError(f"{where}: {name}() {_failed(exc)}") from exc
