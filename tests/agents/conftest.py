"""Fixtures for the agent tests: a tiny random causal LM with a trained tokenizer and a chat
template, built once per session in a temporary directory."""

from __future__ import annotations

import pytest

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

CORPUS = [
    "hello how are you today",
    "i am fine thanks and you",
    "what do you do for a living",
    "i work at a bank in the city",
    "do you have any pets at home",
    "yes i have a dog and two cats",
] * 20


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory):
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    specials = ["<|end|>", "<|user|>", "<|assistant|>", "<|system|>", "<pad>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300, special_tokens=specials,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    from tokenizers import decoders

    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|end|>", pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    config = GPT2Config(vocab_size=len(fast), n_positions=128, n_embd=32, n_layer=1, n_head=2,
                        eos_token_id=fast.eos_token_id, bos_token_id=fast.eos_token_id)
    model = GPT2LMHeadModel(config)
    out = tmp_path_factory.mktemp("tiny-lm")
    fast.save_pretrained(out)
    model.save_pretrained(out)
    return out
