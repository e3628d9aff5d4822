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


def test_the_zeta_cap_reaches_the_reported_value_and_its_interval_on_text_features(tiny_model_dir, tmp_path):
    """On text features (the frozen encoder, here a tiny model) ``dr_zeta_cap`` clips the zeta
    that weights dr: the reported estimate moves, it is the run's own clipped dr, the weighted
    value is untouched, and every bootstrap draw reads the clipped zeta too."""
    import pyarrow as pa

    from enigma.store.experience import ExperienceStore

    mdp = tabular.TabularDialogueMDP(n_user=2, n_agent=2, max_turns=2, p_agent_first=0.4, seed=0)
    logs = mdp.logs([mdp.random_policy("b1", 1), mdp.random_policy("b2", 2)], 400, seed=0)
    actions = tabular.target_actions(logs, mdp.random_policy("t", 7), n_samples=2, seed=0)
    # the tabular texts ("u0", "a1") as sentences, so that the text features tell them apart
    words = {"u0": "I would like to book a flight.", "u1": "Please cancel my trip to Boston.",
             "a0": "Certainly, which dates suit you?", "a1": "Your booking is cancelled, goodbye."}

    def worded(table: pa.Table) -> pa.Table:
        column = table.schema.get_field_index("text")
        texts = [words.get(t, t) for t in table.column("text").to_pylist()]
        return table.set_column(column, "text", pa.array(texts, pa.string()))

    store = ExperienceStore(logs.dialogues, worded(logs.turns))
    actions = worded(actions)
    encoder = FrozenPairEncoder(EmbeddingCache(str(tiny_model_dir), tmp_path, progress=False))
    base = ope.DiceConfig.preset("exact_nu", encoder="frozen", project_dim=4, agreement=True, tmax=3, device="cpu").with_flat(
        value="dr", q_model="fqe", interval_resamples=20)
    runs = {}
    for name, cap in (("free", None), ("capped", 0.5)):
        est = ope.EnigmaEstimator(base.with_flat(dr_zeta_cap=cap), encoder=encoder, progress=False)
        runs[name] = est.estimate_full(store, HeldOutAgent("t", target_actions=actions))
    ratings = list(runs["free"].estimates)
    for r in ratings:
        values = runs["capped"].runs["all"].solver["values"][r]
        assert runs["capped"].estimates[r]["estimate"] == pytest.approx(values["dr"], abs=1e-6)
        assert values["weighted"] == pytest.approx(runs["free"].runs["all"].solver["values"][r]["weighted"], abs=1e-9)
    assert max(abs(runs["capped"].estimates[r]["estimate"] - runs["free"].estimates[r]["estimate"]) for r in ratings) > 1e-4
    assert any(runs["capped"].intervals[r] != runs["free"].intervals[r] for r in ratings)
