"""A byte-level BPE tokenizer trained on a store's texts, with the chat template the model is
trained on and that ``HFAgent`` prompts it with."""

from __future__ import annotations

from typing import Iterable

END, PAD = "<|end|>", "<pad>"
SPECIALS = [END, "<|user|>", "<|assistant|>", "<|system|>", PAD]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int):
    """A ``PreTrainedTokenizerFast`` (end token ``<|end|>``, padding ``<pad>``) on ``texts``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=END, pad_token=PAD)
    fast.chat_template = CHAT_TEMPLATE
    return fast
