"""studies/reply_support.py's measures, and studies/lm_checkpoints_dev.py's params file for a few
rows: the parts of those studies that do not need a built benchmark."""

from __future__ import annotations

import numpy as np
import pandas as pd

from enigma.dialogue import Turn
from enigma.params import Params
from studies.lm_checkpoints_dev import estimators_params
from studies.reply_support import agent_support, nearest_similarity, wording_means
from tests.conftest import REPO_ROOT


def test_nearest_similarity_is_the_best_cosine_in_the_pool():
    pool = np.eye(3, dtype=np.float32)
    targets = np.array([[1, 0, 0], [0, 0.6, 0.8], [-1, 0, 0]], dtype=np.float32)
    assert nearest_similarity(targets, pool, chunk=2).tolist() == [1.0, np.float32(0.8), 0.0]


def test_agent_support_counts_every_reply_with_its_multiplicity():
    vec = {"a": np.array([1, 0], dtype=np.float32), "b": np.array([0, 1], dtype=np.float32),
           "c": np.array([0.6, 0.8], dtype=np.float32)}
    got = agent_support(["a", "a", "a", "b"], ["a", "c"], vec)  # b's nearest is c, at 0.8
    assert got["replies"] == 4 and got["median_nn"] == 1.0
    assert got["share_0.9"] == 0.75 and got["share_0.8"] == 1.0


def test_wording_means_reads_each_reply_after_its_own_history():
    dialogue = {"d": [Turn(role="user", text="i am Nora, flying to Boston"), Turn(role="agent", text="Booked, Nora.")]}
    told = pd.DataFrame({"dialog_id": ["d"], "turn_index": [1], "text": ["Booked for Nora to Boston."]})
    made_up = pd.DataFrame({"dialog_id": ["d"], "turn_index": [1], "text": ["Booked for Eric to Denver."]})
    assert wording_means(told, dialogue)["names_new"] == 0.0
    assert wording_means(made_up, dialogue)["names_new"] == 1.0


def test_estimators_params_replaces_only_the_benchmarks_list(tmp_path):
    path = estimators_params(REPO_ROOT / "studies" / "params.yaml", "airline-lm-dev", ["enigma", "enigma-ablate-grounding"],
                             out_dir=tmp_path)
    base = Params.load(REPO_ROOT / "studies" / "params.yaml").checkpoint_benchmark("airline-lm-dev").config
    got = Params.load(path).checkpoint_benchmark("airline-lm-dev").config
    assert got.estimators == ["enigma", "enigma-ablate-grounding"]
    assert got.model_dump(exclude={"estimators"}) == base.model_dump(exclude={"estimators"})
