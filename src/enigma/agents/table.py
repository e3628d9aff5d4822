"""The ``table:<path>`` kind: replies computed elsewhere, keyed by dialogue and turn.

The file is Parquet with columns ``dialog_id``, ``turn_index`` (the logged agent turn the reply
stands for), ``text`` and optionally ``sample_index`` and ``state_hash``. A sampling output is
such a table, so it can be replayed as an agent. A table answers only the states it holds:
by key through ``respond_at``, or by history when it carries ``state_hash``.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from enigma.agents.errors import AgentCallError, AgentSpecError
from enigma.agents.fingerprint import state_hash, tree_identity
from enigma.dialogue import History

_REQUIRED = ("dialog_id", "turn_index", "text")


class TableAgent:
    def __init__(self, path: str | Path):
        import pyarrow.parquet as pq

        self.path = Path(path)
        if not self.path.is_file():
            raise AgentSpecError(f"{self.path}: table of replies not found")
        try:
            table = pq.read_table(self.path)
        except Exception as exc:
            raise AgentSpecError(f"{self.path}: not a readable Parquet file ({exc})") from exc
        missing = [c for c in _REQUIRED if c not in table.column_names]
        if missing:
            raise AgentSpecError(f"{self.path}: missing column(s) {missing}; a reply table needs {list(_REQUIRED)}")
        cols = {c: table.column(c).to_pylist() for c in table.column_names}
        n = table.num_rows
        sample = cols.get("sample_index") or list(range(n))
        errors = cols.get("error") or [None] * n
        by_key: dict[tuple[str, int], list[tuple[int, str]]] = defaultdict(list)
        by_state: dict[str, list[tuple[int, str]]] = defaultdict(list)
        seen: set[tuple[str, int, int]] = set()
        for row in range(n):
            d, t, text = cols["dialog_id"][row], cols["turn_index"][row], cols["text"][row]
            where = f"{self.path}: row {row + 1}"
            if errors[row] is not None:
                continue  # a recorded failure of the sampler, not a reply
            if d is None or t is None or ("sample_index" in cols and sample[row] is None):
                raise AgentSpecError(f"{where}: dialog_id, turn_index and sample_index must not be null")
            if not isinstance(text, str) or not text.strip():
                raise AgentSpecError(f"{where}: field 'text' is empty (dialog {d!r}, turn {t})")
            key = (str(d), int(t), int(sample[row]) if "sample_index" in cols else row)
            if "sample_index" in cols and key in seen:
                raise AgentSpecError(f"{where}: duplicate reply for dialog {d!r}, turn {t}, sample {key[2]}")
            seen.add(key)
            by_key[(str(d), int(t))].append((key[2], text))
            if "state_hash" in cols and cols["state_hash"][row]:
                by_state[cols["state_hash"][row]].append((key[2], text))
        self._by_key = {k: [t for _, t in sorted(v)] for k, v in by_key.items()}
        self._by_state = {k: [t for _, t in sorted(v)] for k, v in by_state.items()}

    def __len__(self) -> int:
        return len(self._by_key)

    @staticmethod
    def _take(replies: list[str], n: int, what: str) -> list[str]:
        if len(replies) < n:
            raise AgentCallError(f"{what}: the table holds {len(replies)} repl(ies), {n} requested")
        return replies[:n]

    def respond_at(self, dialog_id: str, turn_index: int, history: History, n: int = 1, seed: int | None = None) -> list[str]:
        replies = self._by_key.get((str(dialog_id), int(turn_index)))
        if replies is None:
            raise AgentCallError(f"{self.path}: no reply for dialog {dialog_id!r}, turn {turn_index}")
        return self._take(replies, n, f"{self.path}: dialog {dialog_id!r}, turn {turn_index}")

    def respond(self, history: History, n: int = 1, seed: int | None = None) -> list[str]:
        h = state_hash(history)
        replies = self._by_state.get(h)
        if replies is None:
            raise AgentCallError(
                f"{self.path}: no reply for this state (state hash {h}); a table agent answers only the "
                "logged states it holds (keyed by dialog_id/turn_index, or by history with a state_hash column)"
            )
        return self._take(replies, n, f"{self.path}: state {h}")

    def fingerprint_parts(self) -> dict[str, Any]:
        return {"file": tree_identity(self.path)}

    def __repr__(self) -> str:
        return f"TableAgent({str(self.path)!r}, {len(self)} states)"
