"""Small hand-made rated stores, shared by the tests that write their chats out in full."""

from __future__ import annotations

import json

import pyarrow as pa

from enigma.store import schema as S
from enigma.store.experience import ExperienceStore


def chat_store(rows, rating_names=("quality",)) -> ExperienceStore:
    """rows: (dialog_id, agent_id, [(role, text), ...], {rating: value or None})."""
    names = list(rating_names)
    d = {"dialog_id": [], "agent_id": [], "source": [], "n_turns": [], "meta": []}
    for n in names:
        d[S.RATING_PREFIX + n] = []
        d[S.RAW_PREFIX + n] = []
    t = {"dialog_id": [], "turn_index": [], "role": [], "text": []}
    for dialog_id, agent_id, turns, ratings in rows:
        d["dialog_id"].append(dialog_id)
        d["agent_id"].append(agent_id)
        d["source"].append("test")
        d["n_turns"].append(len(turns))
        d["meta"].append(json.dumps({}))
        for n in names:
            d[S.RATING_PREFIX + n].append(ratings.get(n))
            d[S.RAW_PREFIX + n].append(ratings.get(n))
        for i, (role, text) in enumerate(turns):
            t["dialog_id"].append(dialog_id)
            t["turn_index"].append(i)
            t["role"].append(role)
            t["text"].append(text)
    dialogues = pa.table(d, schema=S.dialogues_schema(names))
    return ExperienceStore(dialogues, pa.table(t, schema=S.TURNS_SCHEMA))
