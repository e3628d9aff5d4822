"""Stable seeds for the simulator.

Python's ``hash`` of a string changes per process, so every seed here is derived with
CRC32 (strings) and SplitMix64 (mixing): the same parts give the same seed on any machine,
which is what makes generated files byte-identical for the same ``--seed``.
"""

from __future__ import annotations

import random
import zlib

_MASK = (1 << 64) - 1


def _splitmix(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def mix(*parts: int | str) -> int:
    """One 64-bit seed from ints and strings, order-sensitive."""
    h = 0x243F6A8885A308D3
    for p in parts:
        v = p if isinstance(p, int) else zlib.crc32(p.encode("utf-8"))
        h = _splitmix(h ^ (v & _MASK))
    return h


def rng(*parts: int | str) -> random.Random:
    return random.Random(mix(*parts))
