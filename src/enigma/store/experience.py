"""Reading and writing an experience store directory (see ``schema``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from enigma.dialogue import Turn
from enigma.store import schema as S


class StoreError(Exception):
    """A store directory is missing or malformed; the message names the file."""


@dataclass
class ExperienceStore:
    """Rated dialogues in canonical form, held in memory as Arrow tables.

    Stores of the size this project handles (thousands of dialogues) fit in memory easily;
    DuckDB queries them in place (``enigma.store.queries``).
    """

    dialogues: pa.Table
    turns: pa.Table
    rejects: pa.Table | None = None

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, dialogue_columns: "list[str] | None" = None) -> "ExperienceStore":
        """The store at ``path``; ``dialogue_columns``: load only these columns of the dialogues
        (e.g. no ratings, for a reader that must not know them)."""
        path = Path(path)
        if not path.is_dir():
            raise StoreError(f"{path}: not a directory (expected an experience store)")
        tables = {}
        for name, columns in ((S.DIALOGUES_FILE, dialogue_columns), (S.TURNS_FILE, None)):
            f = path / name
            if not f.is_file():
                raise StoreError(f"{f}: missing (an experience store needs {S.DIALOGUES_FILE} and {S.TURNS_FILE})")
            try:
                tables[name] = pq.read_table(f, columns=columns)
            except Exception as exc:  # pyarrow raises several types for corrupt files
                raise StoreError(f"{f}: not a readable Parquet file ({exc})") from exc
        rejects_path = path / S.REJECTS_FILE
        rejects = None
        if rejects_path.is_file():
            try:
                rejects = pq.read_table(rejects_path)
            except Exception as exc:  # as above
                raise StoreError(f"{rejects_path}: not a readable Parquet file ({exc})") from exc
        return cls(tables[S.DIALOGUES_FILE], tables[S.TURNS_FILE], rejects)

    def write(self, path: str | Path, manifest: dict | None = None) -> Path:
        """The store's files in ``path``; a file that cannot be written (a full disk) is
        ``enigma.writes.WriteFailed`` naming it, and is not left half written."""
        from enigma.writes import naming, write_parquet, write_text

        path = Path(path)
        with naming(path):
            path.mkdir(parents=True, exist_ok=True)
        write_parquet(path / S.DIALOGUES_FILE, self.dialogues)
        write_parquet(path / S.TURNS_FILE, self.turns)
        rejects = self.rejects if self.rejects is not None else S.REJECTS_SCHEMA.empty_table()
        write_parquet(path / S.REJECTS_FILE, rejects)
        info = {
            "n_dialogues": self.dialogues.num_rows,
            "n_turns": self.turns.num_rows,
            "n_rejects": rejects.num_rows,
            "agents": self.agents(),
            "ratings": self.rating_names,
        }
        info.update(manifest or {})
        write_text(path / S.MANIFEST_FILE, json.dumps(info, indent=2, sort_keys=True) + "\n")
        return path

    # ---- queries ------------------------------------------------------------------------
    @property
    def rating_names(self) -> list[str]:
        return S.rating_names(self.dialogues.schema)

    def agents(self) -> list[str]:
        return sorted(set(self.dialogues.column("agent_id").to_pylist()))

    def ratings(self, name: str) -> "list[float]":
        return self.dialogues.column(S.RATING_PREFIX + name).to_pylist()

    def filter_agents(self, keep: "set[str] | None" = None, drop: "set[str] | None" = None) -> "ExperienceStore":
        """A store restricted to some agents (``keep``) or without some (``drop``)."""
        agent = self.dialogues.column("agent_id")
        mask = pc.is_in(agent, pa.array(sorted(keep))) if keep is not None else pc.is_valid(agent)
        if drop:
            mask = pc.and_(mask, pc.invert(pc.is_in(agent, pa.array(sorted(drop)))))
        dialogues = self.dialogues.filter(mask)
        turns = self.turns.filter(pc.is_in(self.turns.column("dialog_id"), dialogues.column("dialog_id")))
        return ExperienceStore(dialogues, turns, None)

    def without_agent(self, agent_id: str) -> "ExperienceStore":
        return self.filter_agents(drop={agent_id})

    def histories(self) -> dict[str, list[Turn]]:
        """Every dialogue's turns in order, keyed by dialog id (dialogue order preserved)."""
        out: dict[str, list[Turn]] = {d: [] for d in self.dialogues.column("dialog_id").to_pylist()}
        t = self.turns.sort_by([("dialog_id", "ascending"), ("turn_index", "ascending")])
        for d, role, text in zip(
            t.column("dialog_id").to_pylist(), t.column("role").to_pylist(), t.column("text").to_pylist()
        ):
            if d in out:
                out[d].append(Turn(role, text))
        return out
