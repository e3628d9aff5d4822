"""Tiny random BERT and a tokenizer trained on the spot: real transformer code, test-sized."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

CORPUS = [
    "hello how can i help you today",
    "i want to book a flight to boston",
    "sure which day do you want to fly",
    "next monday in the morning please",
    "there is a flight at nine for two hundred dollars",
    "that is too expensive do you have anything cheaper",
    "sorry no cheaper flight",
    "ok book it thanks bye",
]


def _train_tokenizer():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=200, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]"
    )


def _tiny_bert(tokenizer, type_vocab_size: int = 2):
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
        type_vocab_size=type_vocab_size,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = BertModel(config, add_pooling_layer=False)
    # Random type embeddings are tiny; make type 1 clearly different so type bugs show.
    with torch.no_grad():
        model.embeddings.token_type_embeddings.weight.normal_(0, 1.0)
    return model.eval()


@pytest.fixture(scope="session")
def tiny_tokenizer():
    return _train_tokenizer()


@pytest.fixture()
def tiny_bert(tiny_tokenizer):
    return _tiny_bert(tiny_tokenizer)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tiny_tokenizer) -> Path:
    """The tiny BERT saved as a local Hugging Face directory (for weights and cache tests)."""
    path = tmp_path_factory.mktemp("tiny-bert")
    _tiny_bert(tiny_tokenizer).save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path
