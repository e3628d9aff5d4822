"""What studies/device_stage.py shrinks to fit a device call must not change what a result depends on:
the cut target actions keep the fingerprint the result files are reused by, and the half-precision
weights keep the integer tensors as they are."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import torch
from safetensors.torch import load_file, save_file

from enigma.contracts import HeldOutAgent
from enigma.evaluation.fingerprints import target_fingerprint
from studies.device_stage import cut_targets, half_precision_weights


def test_cut_targets_keep_the_fingerprint_and_the_sampling_metadata(tmp_path):
    table = pa.table({
        "dialog_id": ["d1", "d1", "d2"], "turn_index": pa.array([1, 3, 1], pa.int32()),
        "sample_index": pa.array([0, 0, 0], pa.int32()), "text": ["hi there", "booked", None],
        "agent_fingerprint": ["f"] * 3, "state_hash": ["a", "b", "c"], "seed": [1, 2, 3], "error": [None, None, "timeout"],
    }).replace_schema_metadata({"enigma.sampling.spec": "python:x:y"})
    pq.write_table(table, tmp_path / "a.parquet")
    cut_targets(tmp_path / "a.parquet", tmp_path / "b.parquet")
    cut = pq.read_table(tmp_path / "b.parquet")
    assert cut.column_names == ["dialog_id", "turn_index", "sample_index", "text", "error"]
    assert cut.schema.metadata[b"enigma.sampling.spec"] == b"python:x:y"
    assert target_fingerprint(HeldOutAgent("x", target_actions=cut)) == target_fingerprint(HeldOutAgent("x", target_actions=table))
    # and the fingerprint does read the text: a changed reply is another result
    other = cut.set_column(3, "text", pa.array(["hi there", "booked!", None]))
    assert target_fingerprint(HeldOutAgent("x", target_actions=other)) != target_fingerprint(HeldOutAgent("x", target_actions=cut))


def test_half_precision_weights_round_floats_and_keep_integers(tmp_path):
    save_file({"w": torch.tensor([0.1, 1 / 3, 7.0]), "position_ids": torch.arange(5).unsqueeze(0)}, tmp_path / "m.safetensors")
    half_precision_weights(tmp_path / "m.safetensors", tmp_path / "h.safetensors")
    half = load_file(tmp_path / "h.safetensors")
    assert half["w"].dtype == torch.float16 and torch.allclose(half["w"].float(), torch.tensor([0.1, 1 / 3, 7.0]), rtol=1e-3)
    assert half["position_ids"].dtype == torch.int64 and half["position_ids"].tolist() == [[0, 1, 2, 3, 4]]
