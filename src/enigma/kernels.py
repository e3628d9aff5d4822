"""One family of CPU kernels on every x86-64 machine, so that a rebuild can give the same bits on
another machine, not only on the same one.

PyTorch, MKL and oneDNN pick their kernels by the processor: AVX-512 where it has it, and MKL
takes other paths on other vendors. Another kernel adds floats in another order, so a sentence
vector moves in its last bits (up to 2.1e-7 on minilm, ``studies/results/cpu_kernels.md``), a
retrieval stand-in picks another reply where two are nearly tied, and the estimates move (by up
to 0.008, seen between two machines). Pinned to AVX2, which x86-64 servers have had since 2013,
the sentence vectors are those an AVX2 machine computes by default (measured). ENIGMA's
estimates are not: setting ``MKL_CBWR`` at all turns on MKL's reproducibility mode, whose
routines take other code paths (which ones was not traced), and on an AVX2 machine one estimate
moved by up to 0.006 under the pin (``studies/results/kernel_pin_estimate.md``).

NumPy's own SIMD loops and the OpenBLAS it bundles choose their kernels too, and the torch pins
do not reach them: on an AVX-512 processor the estimators that compute in NumPy moved by up to
4.2e-9 under the torch pins alone. ``OPENBLAS_CORETYPE=Haswell`` (OpenBLAS's AVX2 kernels) and
``NPY_DISABLE_CPU_FEATURES`` naming the AVX-512 groups keep them on AVX2 too; with all five, an
AVX-512 machine rebuilt the AVX2 machine's reports and results byte for byte
(``studies/results/rebuild_avx512_*_numpy_pinned.md``). NumPy ignores a named feature the
processor lacks, so on an AVX2 machine the setting changes nothing.

These are defaults: a value the user set is kept. torch reads its pins when it first runs a
kernel, NumPy and OpenBLAS theirs when NumPy is imported, so this runs on ``import enigma``,
before any of them: a program that imports NumPy before ``enigma`` keeps NumPy's own choice.
Reports built before the pin move in their last digits when rebuilt.
"""

from __future__ import annotations

import os
import platform
from collections.abc import MutableMapping
from pathlib import Path

# MKL's conditional numerical reproducibility branch; ATen's and oneDNN's kernel ceilings; OpenBLAS's
# kernels (Haswell: its AVX2 family); NumPy's dispatched loops without their AVX-512 groups
PINS = {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell", "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"}


def has_avx2(cpuinfo: str | None = None) -> bool:
    """Whether this processor has AVX2 (x86-64 Linux: /proc/cpuinfo's flags; elsewhere: False)."""
    if cpuinfo is None:
        if platform.machine().lower() not in ("x86_64", "amd64"):
            return False
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    flags = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "")
    return "avx2" in flags.split()


def pin_cpu_kernels(environ: MutableMapping[str, str] = os.environ, cpuinfo: str | None = None) -> dict[str, str]:
    """Set ``PINS`` as defaults in ``environ`` on a processor with AVX2 (elsewhere nothing: the
    pins name kernels it does not have). Returns what was set."""
    if not has_avx2(cpuinfo):
        return {}
    pinned = {}
    for key, value in PINS.items():
        if key not in environ:
            environ[key] = value
            pinned[key] = value
    return pinned
