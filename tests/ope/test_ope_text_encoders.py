"""The estimator with a trainable text encoder (the packed-sequence finetune mode on a tiny
random BERT): the encoder is trained with the heads, and the averaged weights are used for the
final pass without touching the live encoder."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enigma.contracts import HeldOutAgent
from enigma.ope import DiceConfig, EnigmaEstimator
from enigma.ope.tabular import TabularDialogueMDP, target_actions


def _tiny_bert_and_tokenizer():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(["u0 u1 a0 a1 hello"], trainers.WordPieceTrainer(vocab_size=60, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64, type_vocab_size=2, pad_token_id=tokenizer.pad_token_id)
    return BertModel(config, add_pooling_layer=False), tokenizer


@pytest.mark.slow  # imports transformers (tens of seconds on the shared machine)
def test_finetune_encoder_trains_with_the_heads():
    from enigma.encoders.finetune import FinetunePairEncoder

    torch.set_num_threads(1)
    model, tokenizer = _tiny_bert_and_tokenizer()
    encoder = FinetunePairEncoder(model, tokenizer=tokenizer)
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    mdp = TabularDialogueMDP(max_turns=2, p_agent_first=0.3)
    store = mdp.logs([mdp.random_policy("b", 1)], 24, seed=0)
    ta = target_actions(store, mdp.random_policy("t", 7), n_samples=2, seed=0)
    cfg = DiceConfig.preset("gda", encoder="finetune", head_hidden=8, tmax=3, steps=6, batch_size=8,
                            log_every=3, average_last=0.5, device="cpu")
    est = EnigmaEstimator(cfg, encoder=encoder, progress=False)
    full = est.estimate_full(store, HeldOutAgent("t", target_actions=ta))
    out = full.to_estimate().estimates
    assert set(out) == {"match", "short"} and all(np.isfinite(v) for v in out.values())
    changed = [k for k, v in encoder.state_dict().items() if v.is_floating_point() and not torch.equal(v, before[k])]
    assert changed, "the fine-tuned encoder should receive gradient"
    assert [r["step"] for r in full.curves["all"]] == [3, 6]
