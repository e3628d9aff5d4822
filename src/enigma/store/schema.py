"""The canonical tables of the experience store and their Arrow schemas.

A store is a directory with three Parquet files:

- ``dialogues.parquet``: one row per dialogue: ``dialog_id`` (unique), ``agent_id``, ``source``,
  ``n_turns``, ``rating_<name>`` (normalised to [0, 1]) and ``raw_<name>`` (as given) for every
  rating, and ``meta`` (a JSON object as text: personas, rater ids, ...).
- ``turns.parquet``: ``dialog_id``, ``turn_index`` (0-based, contiguous), ``role``
  (``user``/``agent``), ``text``.
- ``rejects.parquet``: every input record that did not make it: ``source_file``, ``record``
  (1-based line or record number), ``dialog_id`` (if known), ``field``, ``reason``.

Rating columns vary by source, so the dialogue schema is built from the rating names.
"""

from __future__ import annotations

import pyarrow as pa

DIALOGUES_FILE = "dialogues.parquet"
TURNS_FILE = "turns.parquet"
REJECTS_FILE = "rejects.parquet"
MANIFEST_FILE = "manifest.json"

RATING_PREFIX = "rating_"
RAW_PREFIX = "raw_"

TURNS_SCHEMA = pa.schema(
    [
        pa.field("dialog_id", pa.string(), nullable=False),
        pa.field("turn_index", pa.int32(), nullable=False),
        pa.field("role", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
    ]
)

REJECTS_SCHEMA = pa.schema(
    [
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("record", pa.int64(), nullable=True),
        pa.field("dialog_id", pa.string(), nullable=True),
        pa.field("field", pa.string(), nullable=True),
        pa.field("reason", pa.string(), nullable=False),
    ]
)

_BASE_DIALOGUE_FIELDS = [
    pa.field("dialog_id", pa.string(), nullable=False),
    pa.field("agent_id", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("n_turns", pa.int32(), nullable=False),
]


def dialogues_schema(rating_names: list[str], raw_names: list[str] | None = None) -> pa.Schema:
    """Schema of ``dialogues.parquet`` for the given ratings. ``raw_names`` defaults to the
    rating names; derived ratings (e.g. See 2019's ``reward``) have no raw column."""
    raw_names = rating_names if raw_names is None else raw_names
    fields = list(_BASE_DIALOGUE_FIELDS)
    fields += [pa.field(RATING_PREFIX + n, pa.float64(), nullable=True) for n in rating_names]
    fields += [pa.field(RAW_PREFIX + n, pa.float64(), nullable=True) for n in raw_names]
    fields.append(pa.field("meta", pa.string(), nullable=True))
    return pa.schema(fields)


def rating_names(schema: pa.Schema) -> list[str]:
    """The rating names of a dialogues table, in column order."""
    return [n[len(RATING_PREFIX) :] for n in schema.names if n.startswith(RATING_PREFIX)]
