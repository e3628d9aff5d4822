"""Suite-wide settings. Stage-specific fixtures live in each stage's test folder."""

from __future__ import annotations

from pathlib import Path

import pytest

import enigma  # noqa: F401  (sets the offline environment before anything else loads)

REPO_ROOT = Path(__file__).resolve().parents[1]
# The raw inputs are in git (data/raw/README.md); a checkout without them is incomplete.
RAW_DATA = REPO_ROOT / "data" / "raw"


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
def raw_data() -> Path:
    # Fails, never skips: a skipped real-data test reads as a pass in CI.
    if not RAW_DATA.is_dir():
        pytest.fail(f"raw data not found at {RAW_DATA}: the repository keeps it in git under data/raw "
                    "(data/raw/README.md); restore it with `git checkout -- data/raw`", pytrace=False)
    return RAW_DATA
