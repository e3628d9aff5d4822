"""The fine-tuned pair encoder: ENIGMA's packed sequence through a trainable transformer.

Each dialogue is packed once (``enigma.encoders.packing``: segments, token types, shared
position ids, the block-causal 2-D mask with one branch per target sample) and all its
state-action pairs come out of one forward pass; gradients flow into the encoder. Dropout is
switched off, as in the authors' runs, so the DICE objective sees a deterministic function.

Works with the packaged MiniLM (BERT), MPNet, or any local Hugging Face encoder:
* A model whose type vocabulary has one entry (RoBERTa) gets a second one, a copy of the
  pretrained type embedding; a model with no type embedding at all (MPNet, DistilBERT) gets a
  zero-initialised one added to its input embeddings.
* Models whose position table reserves rows for padding (RoBERTa, MPNet) get the usual offset;
  MPNet's relative-position bias is computed from the packed position ids as well.
* On a CUDA device the forward pass runs under bf16 autocast (fp16 where bf16 is unsupported);
  the returned vectors are float32.
"""

from __future__ import annotations

import inspect
import os
import types
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from enigma.encoders.base import DialogueActions, PairEncoder
from enigma.encoders.packing import PackedDialogue, PackingError, pack_with_limit, visibility
from enigma.encoders.weights import resolve_weights
from enigma.model_loading import MODEL_LOAD_LOCK


@dataclass
class FinetunePrepared:
    """Packed dialogues; ``n_samples`` is the most target replies any agent turn has (turns
    with fewer get zero vectors in the missing sample slots)."""

    packs: list[PackedDialogue]
    max_agent_turns: int
    n_samples: int

    def __len__(self) -> int:
        return len(self.packs)


class FinetunePairEncoder(PairEncoder):
    """``FinetunePairEncoder("minilm")``, a local directory, or an already built model plus
    its tokenizer (``FinetunePairEncoder(model_obj, tokenizer=tok)``, e.g. a tiny test model)."""

    def __init__(
        self,
        model: str | os.PathLike[str] | nn.Module = "minilm",
        *,
        tokenizer: Any = None,
        max_utterance_tokens: int = 64,
        gradient_checkpointing: bool = False,
        autocast: bool = True,
        weights_cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__()
        if max_utterance_tokens < 1:
            raise ValueError("max_utterance_tokens must be >= 1")
        if isinstance(model, nn.Module):
            if tokenizer is None:
                raise ValueError("FinetunePairEncoder: a model object needs its tokenizer= as well")
            self.model = model
        else:
            path = resolve_weights(model, cache_dir=weights_cache_dir)
            with MODEL_LOAD_LOCK:  # transformers' lazy import is not thread-safe (enigma.model_loading)
                from transformers import AutoModel, AutoTokenizer

                tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
                try:
                    self.model = AutoModel.from_pretrained(path, attn_implementation="sdpa")
                except (ValueError, ImportError):  # an architecture without SDPA support
                    self.model = AutoModel.from_pretrained(path, attn_implementation="eager")
        self.tokenizer = tokenizer
        self.max_utterance_tokens = max_utterance_tokens
        self.autocast = autocast
        for module in self.model.modules():
            if isinstance(module, nn.Dropout):
                module.p = 0.0
        if gradient_checkpointing and hasattr(self.model, "gradient_checkpointing_enable"):
            self.model.gradient_checkpointing_enable()
        self.dim = int(self.model.config.hidden_size)
        self.cls_id, self.sep_id, self.pad_id = self._special_ids(tokenizer)
        self._setup_token_types()
        self.position_offset, self.max_positions = self._position_layout()
        self._setup_relative_bias()

    # ----------------------------------------------------------------- model plumbing
    @staticmethod
    def _special_ids(tokenizer: Any) -> tuple[int, int, int]:
        cls_id = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
        sep_id = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        if cls_id is None or sep_id is None:
            raise ValueError("FinetunePairEncoder: the tokenizer has no start (cls/bos) or separator (sep/eos) token")
        return int(cls_id), int(sep_id), int(pad_id)

    def _setup_token_types(self) -> None:
        embeddings = getattr(self.model, "embeddings", None)
        table = getattr(embeddings, "token_type_embeddings", None)
        accepts = "token_type_ids" in inspect.signature(self.model.forward).parameters
        self.extra_type_embedding: nn.Embedding | None = None
        if isinstance(table, nn.Embedding) and accepts:
            if table.num_embeddings < 2:
                widened = nn.Embedding(2, table.embedding_dim, device=table.weight.device, dtype=table.weight.dtype)
                with torch.no_grad():
                    widened.weight.copy_(table.weight[0].expand(2, -1))
                embeddings.token_type_embeddings = widened
                self.model.config.type_vocab_size = 2
            self.use_token_type_ids = True
        else:
            self.use_token_type_ids = False
            self.extra_type_embedding = nn.Embedding(2, self.dim)
            nn.init.zeros_(self.extra_type_embedding.weight)

    def _position_layout(self) -> tuple[int, int]:
        table = getattr(getattr(self.model, "embeddings", None), "position_embeddings", None)
        if isinstance(table, nn.Embedding):
            offset = (table.padding_idx + 1) if table.padding_idx is not None else 0
            return offset, table.num_embeddings - offset
        limit = getattr(self.model.config, "max_position_embeddings", None) or 1 << 20
        return 0, int(limit)

    def _setup_relative_bias(self) -> None:
        """MPNet adds a relative-position bias computed from sequence indices, not from the
        position ids it is given; in a packed sequence a target reply's distance to its
        history must come from the shared position ids, so the bias is computed from them."""
        encoder = getattr(self.model, "encoder", None)
        self._bias_owner = None
        if encoder is None or not hasattr(encoder, "compute_position_bias") or not hasattr(encoder, "relative_attention_bias"):
            return
        # A bound method (not a closure) so that a deep copy of the model rebinds it to the copy.
        encoder.compute_position_bias = types.MethodType(_packed_position_bias, encoder)
        self._bias_owner = "encoder"

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # ----------------------------------------------------------------- prepare / forward
    def prepare(self, dialogues: list[DialogueActions], max_agent_turns: int) -> FinetunePrepared:
        texts: dict[str, int] = {}
        for d in dialogues:
            for turn in d.turns:
                texts.setdefault(turn.text, len(texts))
            for replies in d.target_replies:
                for reply in replies:
                    if not isinstance(reply, str):
                        raise PackingError(f"dialogue {d.dialog_id}: a target reply is {type(reply).__name__}, expected str")
                    texts.setdefault(reply, len(texts))
        ordered = list(texts)
        token_ids = self.tokenizer(ordered, add_special_tokens=False)["input_ids"] if ordered else []
        n_samples = 1
        packs: list[PackedDialogue] = []
        for d in dialogues:
            if d.n_agent_turns > max_agent_turns:
                raise PackingError(
                    f"dialogue {d.dialog_id}: {d.n_agent_turns} agent turns, more than max_agent_turns={max_agent_turns}"
                )
            if len(d.target_replies) != d.n_agent_turns:
                raise PackingError(
                    f"dialogue {d.dialog_id}: {d.n_agent_turns} agent turns but target replies for {len(d.target_replies)}"
                )
            n_samples = max([n_samples, *(len(r) for r in d.target_replies)])
            packs.append(
                pack_with_limit(
                    d.dialog_id,
                    [t.role for t in d.turns],
                    [token_ids[texts[t.text]] for t in d.turns],
                    d.agent_turns,
                    [[token_ids[texts[r]] for r in replies] for replies in d.target_replies],
                    cls_id=self.cls_id,
                    sep_id=self.sep_id,
                    cap=self.max_utterance_tokens,
                    max_positions=self.max_positions,
                )
            )
        return FinetunePrepared(packs=packs, max_agent_turns=max_agent_turns, n_samples=n_samples)

    def batch_tensors(self, prepared: FinetunePrepared, index: torch.Tensor) -> dict[str, torch.Tensor]:
        """Padded model inputs and gather indices for the dialogues at ``index`` (CPU)."""
        packs = [prepared.packs[int(i)] for i in index.tolist()]
        bsz, length = len(packs), max((p.length for p in packs), default=1)
        k_max, s = prepared.max_agent_turns, prepared.n_samples
        input_ids = torch.full((bsz, length), self.pad_id, dtype=torch.long)
        position_ids = torch.zeros((bsz, length), dtype=torch.long)
        type_ids = torch.zeros((bsz, length), dtype=torch.long)
        segment = torch.zeros((bsz, length), dtype=torch.long)
        branch = torch.full((bsz, length), -1, dtype=torch.long)
        valid = torch.zeros((bsz, length), dtype=torch.bool)
        logged_last = torch.full((bsz, k_max), -1, dtype=torch.long)
        target_last = torch.full((bsz, k_max, s), -1, dtype=torch.long)
        for b, p in enumerate(packs):
            n = p.length
            input_ids[b, :n] = torch.from_numpy(p.input_ids)
            position_ids[b, :n] = torch.from_numpy(p.position_ids) + self.position_offset
            type_ids[b, :n] = torch.from_numpy(p.token_type_ids)
            segment[b, :n] = torch.from_numpy(p.segment.astype(np.int64))
            branch[b, :n] = torch.from_numpy(p.branch.astype(np.int64))
            valid[b, :n] = True
            k = len(p.logged_last)
            logged_last[b, :k] = torch.from_numpy(p.logged_last)
            if k:
                target_last[b, :k, : p.target_last.shape[1]] = torch.from_numpy(p.target_last)
        return {
            "input_ids": input_ids,
            "position_ids": position_ids,
            "token_type_ids": type_ids,
            "attention_mask": visibility(segment, branch, valid),
            "logged_last": logged_last,
            "target_last": target_last,
        }

    def _attention_mask(self, mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        mask = mask.unsqueeze(1)  # [B, 1, L, L]: one mask for every head
        if getattr(self.model.config, "_attn_implementation", "sdpa") == "eager":
            # eager attention adds the mask to the scores
            return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, torch.finfo(dtype).min)
        return mask

    def hidden_states(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        device = self.device
        batch = {k: v.to(device) for k, v in batch.items()}
        use_autocast = self.autocast and device.type == "cuda"
        amp_dtype = torch.bfloat16 if (use_autocast and torch.cuda.is_bf16_supported()) else torch.float16
        with torch.autocast(device.type, dtype=amp_dtype, enabled=use_autocast):
            kwargs: dict[str, Any] = {
                "position_ids": batch["position_ids"],
                "attention_mask": self._attention_mask(batch["attention_mask"], self.model.dtype),
            }
            if self.use_token_type_ids:
                kwargs["input_ids"] = batch["input_ids"]
                kwargs["token_type_ids"] = batch["token_type_ids"]
            else:
                embeds = self.model.get_input_embeddings()(batch["input_ids"])
                kwargs["inputs_embeds"] = embeds + self.extra_type_embedding(batch["token_type_ids"]).to(embeds.dtype)
            bias_owner = getattr(self.model, self._bias_owner) if self._bias_owner else None
            if bias_owner is not None:
                bias_owner._enigma_positions = batch["position_ids"]
            try:
                return self.model(**kwargs).last_hidden_state.float()
            finally:
                if bias_owner is not None:
                    bias_owner._enigma_positions = None

    def forward(self, prepared: FinetunePrepared, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch = self.batch_tensors(prepared, index)
        hidden = self.hidden_states(batch)  # [B, L, h]
        logged_last = batch["logged_last"].to(hidden.device)
        target_last = batch["target_last"].to(hidden.device)
        bsz, k_max = logged_last.shape
        s = target_last.shape[2]
        flat = torch.cat([logged_last, target_last.reshape(bsz, k_max * s)], dim=1)  # [B, K + K*S]
        gathered = torch.gather(hidden, 1, flat.clamp_min(0).unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))
        gathered = gathered * (flat >= 0).unsqueeze(-1).to(gathered.dtype)  # empty slots are zeros
        logged = gathered[:, :k_max]
        target = gathered[:, k_max:].reshape(bsz, k_max, s, hidden.shape[-1])
        return logged, target


def _packed_position_bias(encoder: nn.Module, x: torch.Tensor, position_ids=None, num_buckets: int = 32) -> torch.Tensor:
    """MPNet's relative-position bias from the packed position ids set for this forward pass
    (``[B, H, L, L]``); outside a packed pass, the library's own computation."""
    positions = getattr(encoder, "_enigma_positions", None)
    if positions is None or positions.shape != x.shape[:2]:
        return type(encoder).compute_position_bias(encoder, x, position_ids=position_ids, num_buckets=num_buckets)
    relative = positions[:, None, :] - positions[:, :, None]  # key minus query
    bucket = encoder.relative_position_bucket(relative, num_buckets=num_buckets)
    return encoder.relative_attention_bias(bucket).permute(0, 3, 1, 2).contiguous()
