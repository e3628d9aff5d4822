"""Suite-wide settings. Stage-specific fixtures live in each stage's test folder."""

from __future__ import annotations

from pathlib import Path

import pytest

import enigma  # noqa: F401  (sets the offline environment before anything else loads)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    # Tests are tiny; more threads only fight each other on the 2-core machines.
    try:
        import torch
    except ImportError:  # pragma: no cover
        yield
        return
    torch.set_num_threads(1)
    yield


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA
