"""On-disk cache of sampled replies: one folder per agent fingerprint, holding Parquet parts
written atomically as sampling goes. A crash loses at most the part being built; a rerun
reads every part and asks the agent only for what is missing."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from enigma.writes import naming, write_parquet, write_text

log = logging.getLogger(__name__)

CACHE_SCHEMA = pa.schema(
    [
        pa.field("dialog_id", pa.string()),
        pa.field("turn_index", pa.int32()),
        pa.field("state_hash", pa.string()),
        pa.field("sample_index", pa.int32()),
        pa.field("seed", pa.int64()),
        pa.field("text", pa.string()),
        pa.field("error", pa.string()),
        pa.field("agent_fingerprint", pa.string()),
        # "occurrence" (each logged occurrence of a state drawn on its own) or "state" (one draw
        # per distinct state, a deterministic agent); parts written before it have no such column
        pa.field("draw", pa.string()),
        # per-occurrence draws: the digest of every occurrence of the state in the store that
        # drew the row (``enigma.sampling.plan.plan_calls``); only that store's calls reuse it. Parts written
        # before it have no such column
        pa.field("group", pa.string()),
        # the conversation a retrieved reply was said in, where the agent records it
        # (``transcripts.sources``); null otherwise and in parts written before it
        pa.field("source_context", pa.string()),
        # whether a reply was cut at the agent's length limit, where the agent records it (``hf:``);
        # null otherwise and in parts written before it
        pa.field("at_token_limit", pa.bool_()),
    ]
)


class SampleCache:
    def __init__(self, cache_dir: str | Path, fingerprint: str):
        self.dir = Path(cache_dir) / fingerprint
        self.fingerprint = fingerprint
        with naming(self.dir):
            self.dir.mkdir(parents=True, exist_ok=True)
        self._counter = 0

    def write_info(self, info: dict) -> None:
        path = self.dir / "agent.json"
        if not path.exists():
            write_text(path, json.dumps(info, indent=2, sort_keys=True) + "\n")

    def parts(self) -> list[Path]:
        return sorted(self.dir.glob("part-*.parquet"))

    def read(self) -> list[dict]:
        """Every cached row, oldest part first (later rows win on the same key)."""
        rows: list[dict] = []
        for part in self.parts():
            try:
                table = pq.read_table(part)
            except Exception as exc:  # a part cut short by a crash outside our atomic write
                bad = part.with_suffix(".corrupt")
                os.replace(part, bad)
                log.warning("%s: unreadable sample part moved aside to %s (%s); its states will be re-sampled", part, bad.name, exc)
                continue
            rows.extend(table.to_pylist())
        return rows

    def append(self, rows: Iterable[dict]) -> Path | None:
        rows = list(rows)
        if not rows:
            return None
        self._counter += 1
        name = f"part-{time.time_ns():020d}-{os.getpid()}-{self._counter:05d}.parquet"
        # atomic: readers see a whole part or none, and a failed write (a full disk) leaves none
        return write_parquet(self.dir / name, pa.Table.from_pylist(rows, schema=CACHE_SCHEMA))
