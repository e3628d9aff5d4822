"""The text encoders through the DICE trainer (the seam of encoders/base.py), end to end."""

from __future__ import annotations

import math

import pytest

import enigma.ope as ope
import enigma.ope.tabular as tabular
from enigma.contracts import HeldOutAgent
from enigma.encoders.finetune import FinetunePairEncoder
from enigma.encoders.frozen import FrozenPairEncoder
from enigma.encoders.text_cache import EmbeddingCache



@pytest.fixture(scope="module")
def problem():
    mdp = tabular.TabularDialogueMDP(n_user=2, n_agent=2, max_turns=2, p_agent_first=0.4, seed=0)
    store = mdp.logs([mdp.random_policy("b1", 1), mdp.random_policy("b2", 2)], 30, seed=0)
    return store, tabular.target_actions(store, mdp.random_policy("t", 7), n_samples=2, seed=0)


@pytest.mark.parametrize("kind", ["frozen", "finetune"])
def test_estimate_runs_with_text_encoder(kind, problem, tiny_model_dir, tiny_bert, tiny_tokenizer, tmp_path):
    store, actions = problem
    if kind == "frozen":
        encoder = FrozenPairEncoder(EmbeddingCache(str(tiny_model_dir), tmp_path, progress=False), projection_dim=8)
    else:
        encoder = FinetunePairEncoder(tiny_bert, tokenizer=tiny_tokenizer)
    cfg = ope.DiceConfig.preset("gda", encoder=kind, head_hidden=8, tmax=3, steps=6, log_every=3, device="cpu")
    est = ope.EnigmaEstimator(cfg, encoder=encoder, progress=False)
    out = est.estimate(store, HeldOutAgent("t", target_actions=actions)).estimates
    assert out and all(math.isfinite(v) for v in out.values())
