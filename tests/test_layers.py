"""The layers of ``enigma``: no module imports itself back through others, and params.yaml's
typed root imports only the sections' config modules.

Both read the source (``ast``), not a running interpreter: an import inside a function counts as
much as one at the top of a module, since a function-level import does not remove a cycle, it
only puts off the crash until the function runs (``Benchmark.build_estimator`` once hid
``enigma.estimators -> enigma.params -> enigma.pipeline.config -> enigma.estimators`` so). An
import of ``a.b.c`` also runs the packages ``a.b`` on the way (their ``__init__.py``), so it
counts as an import of each of them too. Not counted: imports under ``if TYPE_CHECKING:``, which
never run (they are for type checkers; ``enigma.contracts`` names ``ExperienceStore`` so, which
imports no contract back: its ``Turn`` is ``enigma.dialogue``'s).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# What params.py may import: the modules that hold the typed sections and nothing that runs a
# stage. Each must itself import (at module level) nothing of enigma outside this list.
CONFIG_MODULES = {
    "enigma.agents.config",
    "enigma.comparators.config",
    "enigma.encoders.config",
    "enigma.evaluation.config",
    "enigma.lm.config",
    "enigma.ope.config",
    "enigma.ope.presets",  # not a section: the named DICE presets a section picks; imports nothing
    "enigma.pipeline.config",
    "enigma.redaction",  # not a section: hides credentials in its error messages; imports nothing
    "enigma.rollouts.config",
    "enigma.sampling.config",
    "enigma.sim.config",
    "enigma.store.config",
    "enigma.tracking.config",
}


def _modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name)."""
    out = {}
    for f in sorted((SRC / "enigma").rglob("*.py")):
        parts = list(f.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


MODULES = _modules()


def _type_checking_only(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imported_names(name: str, top_level_only: bool = False) -> list[tuple[str, int]]:
    """The dotted names module ``name`` imports, with their lines: at module level and inside
    functions (``top_level_only``: at module level only), not under ``if TYPE_CHECKING:``."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking_only(child):
                for c in child.orelse:
                    visit_one(c)
                continue
            visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.extend((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package upwards
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for a in node.names:  # ``from pkg import submodule`` imports the submodule
                sub = f"{module}.{a.name}"
                found.append((sub if sub in MODULES else module, node.lineno))
        elif not (top_level_only and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))):
            visit(node)

    visit(ast.parse(path.read_text(), str(path)))
    return found


def _nearest_module(dotted: str) -> str | None:
    """The enigma module an imported name is (or is in: ``from m import name``); None outside."""
    if dotted != "enigma" and not dotted.startswith("enigma."):
        return None
    while dotted not in MODULES:
        dotted = dotted.rpartition(".")[0]
    return dotted


def _targets(importer: str, dotted: str) -> set[str]:
    """The enigma modules an import of ``dotted`` runs: the module (or the nearest enclosing one
    that is a module, for ``from m import name``) and the packages above it, but not the
    importer's own packages (they are already running when it runs) nor ``enigma`` itself."""
    dotted = _nearest_module(dotted)
    out: set[str] = set()
    while dotted and dotted != "enigma":
        if dotted in MODULES and dotted != importer and not importer.startswith(dotted + "."):
            out.add(dotted)  # (a folder without __init__.py is a namespace package: nothing runs)
        dotted = dotted.rpartition(".")[0]
    return out


def _graph(top_level_only: bool = False) -> dict[str, dict[str, int]]:
    """module -> {module it imports: the line}."""
    graph: dict[str, dict[str, int]] = {}
    for name in MODULES:
        edges = graph.setdefault(name, {})
        for dotted, line in _imported_names(name, top_level_only):
            for target in _targets(name, dotted):
                edges.setdefault(target, line)
    return graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def _describe(graph: dict[str, dict[str, int]], component: list[str]) -> str:
    return "; ".join(f"{a} -> {b} ({MODULES[a].relative_to(SRC)}:{line})"
                     for a in component for b, line in sorted(graph[a].items()) if b in component)


def test_no_module_imports_itself_back_through_others():
    graph = _graph()
    cycles = _cycles(graph)
    assert not cycles, "import cycles among enigma's modules:\n" + "\n".join(_describe(graph, c) for c in cycles)


def test_the_cycle_check_finds_a_cycle_hidden_in_a_function():
    """The check itself: a function-level import that closes a loop is one."""
    graph = {"enigma.x": {"enigma.y": 1}, "enigma.y": {"enigma.z": 3}, "enigma.z": {"enigma.x": 9}, "enigma.w": {"enigma.x": 2}}
    assert _cycles(graph) == [["enigma.x", "enigma.y", "enigma.z"]]
    # and the reading counts imports inside functions: train.py imports the registry only there
    assert "enigma.estimators" in _graph()["enigma.pipeline.train"]
    assert "enigma.estimators" not in _graph(top_level_only=True)["enigma.pipeline.train"]


def test_params_imports_only_the_config_modules():
    """params.py reads params.yaml into typed sections; building estimators, checking agents or
    running a stage belongs to the layers above it, which import it (not the other way round)."""
    direct = {_nearest_module(dotted) for dotted, _ in _imported_names("enigma.params")}
    beyond = {m for m in direct if m is not None} - CONFIG_MODULES
    assert not beyond, f"enigma.params imports {sorted(beyond)}"
    # and the config modules, when loaded, load nothing but one another (a factory method of a
    # config that builds its object may import the object's module when it is called)
    loaded = _graph(top_level_only=True)
    for name in sorted(CONFIG_MODULES):
        beyond = {m for m in loaded[name] if m not in CONFIG_MODULES and m not in _packages_of(CONFIG_MODULES)}
        assert not beyond, f"{name} imports {sorted(beyond)} at module level"


def _packages_of(modules: set[str]) -> set[str]:
    """The packages an import of these modules runs on the way (``enigma.agents`` for
    ``enigma.agents.config``); what their ``__init__.py`` loads is checked by running it
    (``test_loading_params_loads_no_stage_code``)."""
    return {m.rpartition(".")[0] for m in modules if m.rpartition(".")[0] in MODULES}


def test_loading_params_loads_no_stage_code():
    """In a fresh interpreter, ``import enigma.params`` (every command's first step) loads none of
    the code that runs a stage, through a package's ``__init__`` either: ``enigma.sampling``'s and
    ``enigma.tracking``'s once re-exported the sampler and the MLflow logging, so reading settings
    loaded the agents, the store and pyarrow (0.52 s against 0.23 s)."""
    import subprocess
    import sys

    code = "import sys, enigma.params; print(' '.join(sorted(m for m in sys.modules if m.startswith(('enigma', 'torch', 'pyarrow', 'mlflow')))))"
    loaded = set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split())
    stage_code = {"enigma.sampling.sampler", "enigma.tracking.mlflow_log", "enigma.tracking.results", "enigma.store.experience",
                  "enigma.estimators", "torch", "pyarrow", "mlflow"}
    assert not loaded & stage_code, sorted(loaded & stage_code)
