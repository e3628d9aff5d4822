"""The development and test halves of a benchmark's agents.

Leave-one-agent-out estimation is unchanged: every agent is still held out in turn and
estimated from all the others' logs. What the split decides is only over which agents a
correlation is taken. Choices (a default, a setting, a calibration) read the ``dev`` half; the
reports show the ``test`` half first, beside the half the choice was made on. A choice's rule
reads dev rows only, but the test halves have been seen (every report shows them), so they are
not untouched data: ``docs/results.md`` says what each half is exactly.

The rule is fixed and knows nothing about the agents but their ids: the agents are ordered by
the SHA-256 of ``"<salt>:<agent_id>"`` and the first ``round(n * test_share)`` of them (at least
one, at most n - 1) are the test half. Two machines, or two runs, split the same ids the same
way. Ranking rather than a threshold on the hash keeps the halves even: with See 2019's 27 bots
a threshold at one half gave 7 test bots against 20.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

from enigma.evaluation.config import SplitConfig

HALVES = ("test", "dev")  # the order in which reports show them


def _key(agent_id: str, salt: str) -> bytes:
    return hashlib.sha256(f"{salt}:{agent_id}".encode("utf-8")).digest()


def split_agents(agents: Iterable[str], config: SplitConfig | None = None, benchmark: str | None = None) -> dict[str, list[str]]:
    """``{"test": [...], "dev": [...]}``, each sorted by id; with one agent, it is the test half;
    a benchmark of ``test_only``: all of them; of ``dev_only``: all of them are dev."""
    cfg = config or SplitConfig()
    if benchmark is not None and benchmark in cfg.test_only:
        return {"test": sorted(set(agents)), "dev": []}
    if benchmark is not None and benchmark in cfg.dev_only:
        return {"test": [], "dev": sorted(set(agents))}
    ordered = sorted(set(agents), key=lambda a: _key(a, cfg.salt))
    n = len(ordered)
    k = min(max(round(n * cfg.test_share), 1), max(n - 1, 1)) if n else 0
    return {"test": sorted(ordered[:k]), "dev": sorted(ordered[k:])}
