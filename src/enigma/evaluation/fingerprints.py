"""What a saved (estimator, agent) result depends on, as short digests: the experience data, the
estimator's settings and what it was given about the agent. A result file is reused only while
all three are unchanged, so a long run can be stopped and resumed and an edited setting reruns
exactly the results it changes."""

from __future__ import annotations

import hashlib
import json
from typing import Sequence

import pandas as pd
import pyarrow as pa

from enigma.contracts import Estimator, HeldOutAgent
from enigma.evaluation.heldout import regime_names
from enigma.store import schema as S
from enigma.store.experience import ExperienceStore


def store_fingerprint(store: ExperienceStore) -> str:
    """Changes when the set of dialogues, their agents or their ratings change."""
    cols = ["dialog_id", "agent_id"] + [S.RATING_PREFIX + r for r in store.rating_names]
    t = store.dialogues.select(cols).sort_by([("dialog_id", "ascending")])
    h = hashlib.sha256()
    for c in cols:
        h.update(c.encode())
        h.update(json.dumps(t.column(c).to_pylist(), default=str).encode())
    h.update(str(store.turns.num_rows).encode())
    return h.hexdigest()[:16]


def _table_digest(table: pa.Table, columns: Sequence[str]) -> str:
    cols = [c for c in columns if c in table.schema.names]
    if not cols or table.num_rows == 0:
        return f"empty:{table.num_rows}"
    frame = table.select(cols).to_pandas()
    rows = pd.util.hash_pandas_object(frame, index=False).to_numpy()
    return hashlib.sha256(rows.tobytes() + ",".join(cols).encode()).hexdigest()[:16]


def target_fingerprint(target: HeldOutAgent) -> str:
    """Changes when what the estimator is given about the agent changes: its replies at the
    logged states, its rollouts, its unrated dialogues (texts included), or the labels."""
    parts = [json.dumps(target.labels, sort_keys=True)]
    if target.target_actions is not None:
        # source_context only where the sampler recorded it: other tables digest as before
        parts.append(_table_digest(target.target_actions, ["dialog_id", "turn_index", "sample_index", "text", "error", "source_context"]))
    for store in (target.rollouts, target.unrated_dialogues):
        if store is not None:
            parts.append(_table_digest(store.dialogues, ["dialog_id", "agent_id"]))
            parts.append(_table_digest(store.turns, ["dialog_id", "turn_index", "role", "text"]))
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def estimator_fingerprint(estimator: Estimator) -> str:
    """The estimator's name, regimes, ``fingerprint()`` (all its settings) and the version of its
    numbers (``numerics``, bumped by a code change that moves them; 1 for an estimator that names
    none), and for one that reads the embedding cache the version of its vectors, digested."""
    numerics = getattr(estimator, "numerics", 1)
    text = f"{estimator.name}|{regime_names(estimator)}|{estimator.fingerprint()}|numerics={numerics}"
    if getattr(estimator, "embedder", None) is not None:
        from enigma.encoders.text_cache import VECTORS

        text += f"|vectors={VECTORS}"  # a comparator reading the embedding cache: its recipe moves the numbers
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def result_fingerprint(experience: ExperienceStore, estimator: Estimator, target: HeldOutAgent) -> str:
    return "-".join([store_fingerprint(experience), estimator_fingerprint(estimator), target_fingerprint(target)])
