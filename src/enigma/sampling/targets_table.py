"""The target table a sampling run writes (``enigma.sampling.sampler``): one row per logged
agent turn and sample, its columns, and their values from the sample cache's rows."""

from __future__ import annotations

from typing import Callable, Sequence

import pyarrow as pa

from enigma.sampling.plan import LoggedState

OUTPUT_SCHEMA = pa.schema(
    [
        pa.field("dialog_id", pa.string()),
        pa.field("turn_index", pa.int32()),
        pa.field("sample_index", pa.int32()),
        pa.field("text", pa.string()),
        pa.field("agent_fingerprint", pa.string()),
        pa.field("state_hash", pa.string()),
        pa.field("seed", pa.int64()),
        pa.field("error", pa.string()),
    ]
)
# Added after OUTPUT_SCHEMA's columns when the agent records where each reply came from (a
# retrieval stand-in with ``transcripts.sources``); other tables stay as they were.
SOURCE_FIELD = pa.field("source_context", pa.string())
# Added likewise when the agent records whether a reply was cut at its length limit (``hf:``:
# ``max_new_tokens``); null where a reply came another way (asked alone after a failed batch).
LIMIT_FIELD = pa.field("at_token_limit", pa.bool_())


def schema_of(sourced: bool, limited: bool) -> pa.Schema:
    """``OUTPUT_SCHEMA``, then the source column where the agent records sources and the
    length-limit column where it records that."""
    schema = OUTPUT_SCHEMA.append(SOURCE_FIELD) if sourced else OUTPUT_SCHEMA
    return schema.append(LIMIT_FIELD) if limited else schema


def target_columns(states: Sequence[LoggedState], n_samples: int, row_at: Callable[[LoggedState, int], dict],
                   fingerprint: str, seed: int, *, sourced: bool, limited: bool) -> dict[str, list]:
    """The table's columns, state by state in the store's order, sample by sample: ``row_at(state,
    i)`` is the cache's row of sample ``i`` at that occurrence."""
    columns: dict[str, list] = {name: [] for name in schema_of(sourced, limited).names}
    for st in states:
        for i in range(n_samples):
            row = row_at(st, i)
            columns["dialog_id"].append(st.dialog_id)
            columns["turn_index"].append(st.turn_index)
            columns["sample_index"].append(i)
            columns["text"].append(row["text"])
            columns["agent_fingerprint"].append(fingerprint)
            columns["state_hash"].append(st.state_hash)
            columns["seed"].append(seed)
            columns["error"].append(row["error"])
            if sourced:
                columns["source_context"].append(row.get("source_context"))
            if limited:
                columns["at_token_limit"].append(row.get("at_token_limit"))
    return columns
