"""The encode stage: the store's utterances and the sampled replies end up in the cache."""

from __future__ import annotations

import pyarrow as pa
import pytest

from enigma.encoders.text_cache import EmbeddingCache
from enigma.encoders.warm import target_texts, warm_cache
from enigma.store import schema as S
from enigma.store.experience import ExperienceStore


def _store() -> ExperienceStore:
    turns = pa.table(
        {
            "dialog_id": ["a", "a", "b", "b"],
            "turn_index": pa.array([0, 1, 0, 1], pa.int32()),
            "role": ["user", "agent", "user", "agent"],
            "text": ["hello", "how can i help", "", "how can i help"],
        },
        schema=S.TURNS_SCHEMA,
    )
    dialogues = pa.table({"dialog_id": ["a", "b"], "agent_id": ["x", "y"]})
    return ExperienceStore(dialogues, turns)


def _targets(texts, errors) -> pa.Table:
    n = len(texts)
    return pa.table({"dialog_id": ["a"] * n, "turn_index": [1] * n, "sample_index": list(range(n)), "text": texts, "error": errors})


def test_warm_then_everything_is_a_hit(tiny_model_dir, tmp_path):
    cache = EmbeddingCache(str(tiny_model_dir), tmp_path, progress=False)
    targets = _targets(["book a flight", None, "hello"], [None, "timeout", None])
    stats = warm_cache(cache, _store(), [("agent-z", targets)])
    assert stats.texts == 3 and stats.newly_encoded == 3  # hello, how can i help, book a flight
    again = warm_cache(EmbeddingCache(str(tiny_model_dir), tmp_path, progress=False), _store(), [("agent-z", targets)])
    assert again.newly_encoded == 0


def test_malformed_targets_are_named():
    with pytest.raises(ValueError, match="agent-z: row 1: field 'text' is NoneType but 'error' is empty"):
        target_texts(_targets(["ok", None], [None, None]), "agent-z")
    with pytest.raises(ValueError, match="agent-z: no 'text' column"):
        target_texts(pa.table({"reply": ["x"]}), "agent-z")


def test_encode_command(tiny_model_dir, tmp_path):
    import json

    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from enigma.cli import app

    store_dir = _store().write(tmp_path / "store")
    pq.write_table(_targets(["book a flight"], [None]), tmp_path / "t.parquet")
    args = ["encode", "-e", str(store_dir), "-t", str(tmp_path / "t.parquet"), "--model", str(tiny_model_dir),
            "--cache-dir", str(tmp_path / "emb"), "--no-progress", "--params", str(tmp_path / "none.yaml")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "none.yaml: parameters file not found" in result.output
    (tmp_path / "p.yaml").write_text("encode:\n  model: minilm\n")
    args[-1] = str(tmp_path / "p.yaml")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = result.output  # transformers' loading bar (stderr) may share the line
    stats = json.loads(out[out.index("{") : out.rindex("}") + 1])
    assert stats["newly_encoded"] == 3 and stats["texts"] == 3
    result = CliRunner().invoke(app, args[:3] + ["-t", str(tmp_path / "missing.parquet")] + args[5:])
    assert result.exit_code == 2 and "missing.parquet: targets not found" in result.output
