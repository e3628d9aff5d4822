import math

import numpy as np
import pyarrow as pa
import pytest

from enigma.comparators.baselines import ExperienceMean, ReplyLength
from enigma.comparators.dialogues import (
    AgentDialogue,
    ComparatorInputError,
    replies_at_logged_states,
)
from enigma.comparators.features import FeatureExtractor, NidfTable, internal_repetition, words
from enigma.comparators.handcrafted import DialogueFeatureEstimator
from enigma.contracts import HeldOutAgent, Regime
from enigma.dialogue import Turn


def dlg(*turns, scored=None):
    ts = tuple(Turn(r, x) for r, x in turns)
    sc = tuple(i for i, t in enumerate(ts) if t.role == "agent") if scored is None else scored
    return AgentDialogue("d", ts, sc)


def test_self_repetition_and_question_rate_on_hand_made_dialogues():
    parrot = dlg(("user", "hi"), ("agent", "i like big dogs"), ("user", "ok"), ("agent", "i like big dogs"))
    fresh = dlg(("user", "hi"), ("agent", "i like big dogs"), ("user", "ok"), ("agent", "what do you do?"))
    fx = FeatureExtractor()
    m = fx.matrix([parrot, fresh], ["self_repetition", "question_rate", "length"])
    # the second reply of the parrot repeats all its bigrams; the first reply has no earlier turn
    assert m[0].tolist() == [1.0, 0.0, 4.0]
    assert m[1, 0] == 0.0 and m[1, 1] == 0.5 and m[1, 2] == 4.0


def test_partner_and_internal_repetition():
    echo = dlg(("user", "i love pizza a lot"), ("agent", "i love pizza too"))
    m = FeatureExtractor().matrix([echo], ["partner_repetition", "internal_repetition"])
    assert m[0, 0] == pytest.approx(2 / 3)  # "i love", "love pizza" of 3 bigrams
    assert m[0, 1] == 0.0
    assert internal_repetition(words("ha ha ha ha")) == pytest.approx(1 - 1 / 3)


def test_only_scored_turns_count_but_earlier_agent_turns_are_remembered():
    d = dlg(("agent", "good day to you"), ("user", "hi"), ("agent", "good day to you"), scored=(2,))
    m = FeatureExtractor().matrix([d], ["self_repetition", "length"])
    assert m[0].tolist() == [1.0, 4.0]


def test_nidf_rare_words_are_specific():
    table = NidfTable.from_texts(["i like dogs", "i like cats", "i like quantum chromodynamics"])
    assert table.nidf("i") == 0.0
    assert table.nidf("chromodynamics") == 1.0
    assert table.nidf("never-seen") == 1.0
    assert 0.0 < table.nidf("dogs") <= 1.0
    assert table.specificity(["i", "chromodynamics"]) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        NidfTable.from_texts([])


def test_relatedness_is_the_cosine_to_the_previous_user_turn():
    class Fixed:
        # two orthogonal directions and one in between: the mechanics of the cosine only
        vecs = {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 1.0]}

        def embed(self, texts):
            return np.array([self.vecs[t] for t in texts], dtype=np.float32)

    d1 = dlg(("user", "a"), ("agent", "b"))
    d2 = dlg(("user", "a"), ("agent", "c"))
    m = FeatureExtractor(embedder=Fixed()).matrix([d1, d2], ["relatedness"])
    assert m[0, 0] == pytest.approx(0.0)
    assert m[1, 0] == pytest.approx(1 / math.sqrt(2))


def test_unknown_feature_is_rejected():
    with pytest.raises(ValueError, match="unknown"):
        FeatureExtractor().matrix([], ["sparkle"])


def _rep_world(store_factory):
    """Agents whose quality falls with how much they repeat themselves."""
    rows = []
    k = 0
    for agent, rep, q in [("a1", 0, 0.9), ("a2", 1, 0.2), ("a3", 0, 0.8), ("a4", 1, 0.3)]:
        for i in range(6):
            second = "i like big dogs" if rep else f"tell me about topic {i} please"
            rows.append(
                (f"{agent}-{i}", agent, [("user", "hello"), ("agent", "i like big dogs"), ("user", "ok"), ("agent", second)], {"quality": q})
            )
            k += 1
    return store_factory(rows)


def test_feature_estimator_learns_the_sign_from_other_agents(store_factory):
    store = _rep_world(store_factory)
    good_rollouts = store.filter_agents(keep={"a1"})
    bad_rollouts = store.filter_agents(keep={"a2"})
    experience = store.filter_agents(keep={"a3", "a4"})
    est = DialogueFeatureEstimator(("self_repetition",), Regime.OWN_ROLLOUTS)
    assert est.regimes == frozenset({Regime.OWN_ROLLOUTS})
    good = est.estimate(experience, HeldOutAgent("a1", rollouts=good_rollouts)).estimates["quality"]
    bad = est.estimate(experience, HeldOutAgent("a2", rollouts=bad_rollouts)).estimates["quality"]
    assert good == pytest.approx(0.8, abs=0.02) and bad == pytest.approx(0.3, abs=0.02)
    combined = DialogueFeatureEstimator(("self_repetition", "question_rate", "specificity", "length"), Regime.OWN_ROLLOUTS)
    assert combined.name.startswith("see-features:ridge")
    assert combined.estimate(experience, HeldOutAgent("a1", rollouts=good_rollouts)).estimates["quality"] > combined.estimate(
        experience, HeldOutAgent("a2", rollouts=bad_rollouts)
    ).estimates["quality"]


def test_feature_estimator_needs_its_regime_input(store_factory):
    store = _rep_world(store_factory)
    est = DialogueFeatureEstimator(("length",), Regime.OWN_ROLLOUTS)
    with pytest.raises(ComparatorInputError, match="no rollouts"):
        est.estimate(store, HeldOutAgent("x"))


def _actions(rows):
    cols = ["dialog_id", "turn_index", "sample_index", "text", "error"]
    return pa.table({c: [r[i] for r in rows] for i, c in enumerate(cols)})


def test_replies_at_logged_states_replace_agent_turns_and_count_failures(store_factory):
    store = _rep_world(store_factory)
    acts = _actions([("a1-0", 1, 0, "new reply", None), ("a1-0", 3, 0, "x", "timeout"), ("a1-1", 3, 0, "other?", None)])
    got = replies_at_logged_states(store, HeldOutAgent("t", target_actions=acts))
    assert got.n_failed_replies == 1
    by_id = {d.dialog_id: d for d in got.dialogues}
    assert by_id["a1-0#0"].scored == (1,) and by_id["a1-0#0"].turns[1].text == "new reply"
    assert by_id["a1-0#0"].turns[3].text == "tell me about topic 0 please"  # logged turn kept
    assert by_id["a1-1#0"].scored_texts() == ["other?"]


@pytest.mark.parametrize(
    "row, field",
    [(("nope", 1, 0, "r", None), "dialog_id"), (("a1-0", 0, 0, "r", None), "turn_index"), (("a1-0", 1, 0, None, None), "text")],
)
def test_malformed_target_actions_name_the_row_and_field(store_factory, row, field):
    store = _rep_world(store_factory)
    with pytest.raises(ComparatorInputError, match=f"row 1 .*field {field}"):
        replies_at_logged_states(store, HeldOutAgent("t", target_actions=_actions([row])))


def test_experience_mean_ignores_unrated_dialogues(store_factory):
    store = store_factory(
        [("d1", "a", [("agent", "x")], {"quality": 0.2, "fun": None}), ("d2", "b", [("agent", "y")], {"quality": 0.6, "fun": 1.0})],
        rating_names=("quality", "fun"),
    )
    est = ExperienceMean()
    assert est.regimes == frozenset({Regime.NONE})
    assert est.estimate(store, HeldOutAgent("z")).estimates == pytest.approx({"quality": 0.4, "fun": 1.0})


def test_reply_length_maps_length_to_rating_by_regression(store_factory):
    rows = []
    for agent, n, q in [("short", 2, 0.2), ("mid", 5, 0.5), ("long", 8, 0.8)]:
        for i in range(4):
            rows.append((f"{agent}{i}", agent, [("user", "hi"), ("agent", " ".join(["w"] * n))], {"quality": q}))
    store = store_factory(rows)
    acts = _actions([(f"short{i}", 1, 0, " ".join(["w"] * 7), None) for i in range(4)])
    est = ReplyLength(Regime.REPLIES_AT_LOGGED_STATES, ridge_alpha=1e-6)  # exact line fit
    result = est.estimate(store.without_agent("mid"), HeldOutAgent("mid", target_actions=acts))
    assert result.estimates["quality"] == pytest.approx(0.7, abs=1e-4)
    assert result.diagnostics["mean_length"] == 7.0


def test_the_registry_builds_every_named_estimator_with_a_unique_name(tmp_path):
    from enigma.contracts import Estimator
    from enigma.estimators import build_estimator, names
    from enigma.params import Params

    p = tmp_path / "params.yaml"
    p.write_text("comparators:\n  ridge_alpha: 2.0\n")
    params = Params.load(p)
    built = [build_estimator(n, params) for n in names(params)]
    assert all(isinstance(e, Estimator) for e in built)
    assert len({e.name for e in built}) == len(built)
    assert build_estimator("see-length-rollouts", params).config.ridge_alpha == 2.0
    with pytest.raises(ValueError, match="unknown"):
        build_estimator("adem-but-misspelt", params)


def test_fingerprints_change_only_with_the_settings_that_matter():
    from enigma.comparators.config import AdemConfig, ComparatorsConfig, SpeConfig
    from enigma.estimators import COMPARATORS

    base = ComparatorsConfig()
    other_spe = ComparatorsConfig(spe=SpeConfig(ridge_alpha=3.0))
    other_adem = ComparatorsConfig(adem=AdemConfig(pca_dim=7))
    fp = lambda name, cfg: COMPARATORS[name](cfg).fingerprint()  # noqa: E731
    assert fp("spe-ridge", base) != fp("spe-ridge", other_spe)
    assert fp("spe-ridge", base) == fp("spe-ridge", other_adem)
    assert fp("adem", base) != fp("adem", other_adem)
    assert fp("see-length-rollouts", base) == fp("see-length-rollouts", other_spe)
    assert fp("see-length-rollouts", base) != fp("see-length-replies", base)
