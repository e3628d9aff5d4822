import math

import pyarrow as pa
import pytest
import torch

from enigma.comparators.config import ComparatorsConfig, PerplexityConfig
from enigma.comparators.overlap import BleuEstimator, RougeLEstimator, corpus_bleu, mean_rouge_l, reply_pairs
from enigma.comparators.perplexity import CausalLMScorer, PerplexityEstimator
from enigma.contracts import HeldOutAgent, Regime
from enigma.dialogue import Turn


def test_bleu_on_known_strings():
    assert corpus_bleu(["the cat sat on the mat"], ["the cat sat on the mat"]) == pytest.approx(1.0)
    assert corpus_bleu(["xyz qrs"], ["the cat sat on the mat"]) == pytest.approx(0.0, abs=1e-9)
    # n-gram precisions 4/6, 3/5, 2/4, 1/3; same length, so no brevity penalty
    half = corpus_bleu(["the cat sat on a rug"], ["the cat sat on the mat"])
    assert half == pytest.approx((4 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25)
    with pytest.raises(ValueError):
        corpus_bleu(["a"], [])


def test_rouge_l_on_known_strings():
    assert mean_rouge_l(["the cat sat"], ["the cat sat"]) == pytest.approx(1.0)
    # LCS "the cat" of 3 and 4 tokens: P 2/3, R 2/4, F = 2PR/(P+R)
    assert mean_rouge_l(["the cat ran"], ["the cat was home"]) == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))


def _store_and_actions(store_factory, replies):
    store = store_factory(
        [("d1", "a", [("user", "hi there"), ("agent", "the cat sat on the mat")], {"quality": 0.5, "fun": 0.2})],
        rating_names=("quality", "fun"),
    )
    acts = pa.table({"dialog_id": ["d1"] * len(replies), "turn_index": [1] * len(replies), "sample_index": list(range(len(replies))), "text": replies})
    return store, HeldOutAgent("t", target_actions=acts)


def test_overlap_estimators_return_the_score_for_every_rating(store_factory):
    store, target = _store_and_actions(store_factory, ["the cat sat on the mat"])
    for est in (BleuEstimator(), RougeLEstimator()):
        assert est.regimes == frozenset({Regime.REPLIES_AT_LOGGED_STATES})
        assert est.estimate(store, target).estimates == pytest.approx({"quality": 1.0, "fun": 1.0})
    pairs, failed = reply_pairs(store, target)
    assert failed == 0 and pairs[0].reference == "the cat sat on the mat"
    assert pairs[0].context_turns == (Turn("user", "hi there"),)


def _tiny_lm():
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from enigma.encoders.weights import resolve_weights

    tok = AutoTokenizer.from_pretrained(resolve_weights("minilm"))
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=tok.vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256)
    return LlamaForCausalLM(cfg), tok


def test_reply_nll_counts_only_reply_tokens_and_matches_a_direct_computation():
    model, tok = _tiny_lm()
    scorer = CausalLMScorer(model, tok, max_context_tokens=64, batch_size=2)
    contexts = [[Turn("user", "how are you")], [Turn("user", "hello"), Turn("agent", "hi"), Turn("user", "what now")]]
    replies = ["fine thanks", "let us talk about the weather today"]
    total, count = scorer.reply_nll(contexts, replies)
    for c, r, t, n in zip(contexts, replies, total, count):
        ids, n_rep = scorer.encode(c, r)
        assert n == n_rep == len(tok(r, add_special_tokens=False)["input_ids"])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0], -1)
        direct = -sum(float(logp[p - 1, ids[p]]) for p in range(len(ids) - n_rep, len(ids)))
        assert t == pytest.approx(direct, rel=1e-4)  # batching with padding changes nothing


def test_perplexity_estimator_reports_inverse_perplexity(store_factory):
    model, tok = _tiny_lm()
    store, target = _store_and_actions(store_factory, ["the cat sat", "a dog ran off"])
    est = PerplexityEstimator(ComparatorsConfig(perplexity=PerplexityConfig(max_replies=10)), CausalLMScorer(model, tok))
    result = est.estimate(store, target)
    got = result.estimates
    assert got["quality"] == got["fun"]
    assert got["quality"] == pytest.approx(1 / result.diagnostics["perplexity"])
    assert 0 < got["quality"] < 1


@pytest.mark.slow
def test_bertscore_with_the_local_minilm(store_factory):
    from enigma.comparators.bertscore import BertScoreEstimator

    est = BertScoreEstimator()
    assert "L6" in est.name
    same = est.f1(["i like dogs"], ["i like dogs"])[0]
    other = est.f1(["what is your job?"], ["i like dogs"])[0]
    assert same == pytest.approx(1.0, abs=1e-4) and other < same
    store, target = _store_and_actions(store_factory, ["the cat sat on the mat", "no idea"])
    got = est.estimate(store, target).estimates
    assert 0 < got["quality"] < 1


@pytest.mark.slow
def test_perplexity_under_the_packaged_smollm2():
    scorer = CausalLMScorer.load()
    ctx = [[Turn("user", "Hello! How are you today?")]] * 2
    total, count = scorer.reply_nll(ctx, ["I am fine, thank you. How are you?", "Banana purple seventeen the of of."])
    fluent, garbled = total / count
    assert fluent < garbled
