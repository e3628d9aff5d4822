"""Every study script still imports against today's code, so a study whose imports broke fails
here rather than the day someone reruns it; and the product stays clear of the lab: nothing
under src/, flows/, tasks/, scripts/ or tests/ (outside tests/studies/) imports ``studies``."""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

STUDIES = REPO_ROOT / "studies"
SCRIPTS = sorted(p.stem for p in STUDIES.glob("*.py") if p.stem != "__init__")
# the modules the index calls helpers: imported by the scripts, no work of their own
HELPERS = set(re.findall(r"^\| `(\w+)\.py` \| helper:", (STUDIES / "README.md").read_text(), re.MULTILINE))


@pytest.fixture
def as_run_from_the_command_line():
    """sys.path as ``python studies/<script>.py`` has it (the script's own folder first, so its
    bare ``from provenance import ...`` finds its siblings), restored afterwards along with
    whatever the script's own module-level ``sys.path.insert`` added."""
    saved = list(sys.path)
    sys.path.insert(0, str(STUDIES))
    yield
    sys.path[:] = saved


def test_the_lab_has_its_scripts_each_listed_in_its_index():
    assert len(SCRIPTS) > 40 and "provenance" in SCRIPTS and "ope_enigma_rows" in SCRIPTS
    assert {"bench_params", "result_files", "seeded_rows"} <= HELPERS <= set(SCRIPTS)
    index = (STUDIES / "README.md").read_text()
    assert not [s for s in SCRIPTS if f"| `{s}.py` |" not in index], "studies/README.md: one line per script"


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_study_script_imports(name, as_run_from_the_command_line):
    text = (STUDIES / f"{name}.py").read_text()
    # importing must not run the study: a script's work sits under `if __name__ == "__main__"`,
    # a helper module (the index's "helper:" lines) has no top-level work at all
    assert '__name__ == "__main__"' in text or name in HELPERS, (
        f"studies/{name}.py: put its work under `if __name__ == \"__main__\":` so that importing it only checks its imports")
    module = importlib.import_module(f"studies.{name}")
    assert Path(module.__file__).resolve() == (STUDIES / f"{name}.py").resolve()


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_nothing_outside_the_lab_imports_it():
    product = [p for d in ("src", "flows", "tasks", "scripts", "tests") for p in (REPO_ROOT / d).rglob("*.py")
               if "studies" not in p.relative_to(REPO_ROOT).parts]
    assert len(product) > 100
    offenders = sorted(str(p.relative_to(REPO_ROOT)) for p in product
                       if any(m == "studies" or m.startswith("studies.") for m in _imports(p)))
    assert not offenders, f"only tests/studies/ may import from studies/: {offenders}"
