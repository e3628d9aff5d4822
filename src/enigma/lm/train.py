"""Training the small language model by behaviour cloning, one run per data mix, saving an
``hf:`` checkpoint folder at each step of ``LMConfig.save_at``.

The loss is on the reply's tokens only (and its end token): the model learns to answer, not to
speak for the customer. Every run starts from the same seeded initialisation and draws its
batches from its own seeded stream, so a build is reproducible on a given thread count; torch
runs on ``threads`` threads in each process (its parallel reductions' last bits depend on that
count, not on how many processes share the mixes)."""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path
from typing import Callable

import numpy as np

from enigma.agents.hf import chat_messages
from enigma.lm.config import LMConfig, checkpoint_name
from enigma.lm.corpus import Example, mix
from enigma.store.experience import ExperienceStore

MAX_REPLY_TOKENS = 64  # a longer logged reply is cut (the agents are sampled with fewer new tokens)


def encode(tokenizer, ex: Example, cfg: LMConfig) -> tuple[list[int], int]:
    """(token ids of prompt + reply + end token, where the reply starts), the prompt cut on the
    left to fit the window, as ``HFAgent`` cuts it."""
    prompt = tokenizer.apply_chat_template(chat_messages(ex.history, cfg.history_turns), add_generation_prompt=True,
                                           tokenize=False)
    p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    r = tokenizer(ex.reply, add_special_tokens=False)["input_ids"][:MAX_REPLY_TOKENS] + [tokenizer.eos_token_id]
    p = p[-(cfg.max_tokens - len(r)):]
    return p + r, len(p)


def _batch(rows: list[tuple[list[int], int]], pad: int):
    import torch

    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (seq, start) in enumerate(rows):
        ids[i, : len(seq)] = torch.tensor(seq)
        labels[i, start : len(seq)] = torch.tensor(seq[start:])
        mask[i, : len(seq)] = 1
    return ids, mask, labels


def build_model(cfg: LMConfig, tokenizer):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(cfg.seed)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=cfg.max_tokens, n_embd=cfg.n_embd, n_layer=cfg.n_layer,
                        n_head=cfg.n_head, bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    return GPT2LMHeadModel(config)


def train_mix(model, tokenizer, data: list[tuple[list[int], int]], cfg: LMConfig, seed: int,
              save: Callable[[int, float], None]) -> None:
    """AdamW with a linear warm-up and a cosine decay to a tenth at the last save step; ``save(step,
    loss)`` after every step of ``save_at`` (loss: the mean over the steps since the last save)."""
    import torch

    steps = cfg.save_at[-1]
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

    def lr_at(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        done = (step - cfg.warmup_steps) / max(1, steps - cfg.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    draws = np.random.default_rng(seed)
    model.train()
    losses: list[float] = []
    for step in range(1, steps + 1):
        idx = draws.integers(0, len(data), cfg.batch_size)
        ids, mask, labels = _batch([data[i] for i in idx], tokenizer.pad_token_id)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step in cfg.save_at:
            save(step, float(np.mean(losses)))
            losses = []


def train_run(store_dir: str | Path, out: str | Path, tokenizer, cfg: LMConfig, k: int, threads: int) -> dict:
    """Train mix number ``k`` of ``cfg`` on ``threads`` torch threads and save its checkpoints
    into ``out/<mix>-step<N>/`` (a tokenizer and a model, loadable as ``hf:<dir>``); returns their
    record entries (mix, step, training loss, size). Each mix depends on nothing but its own
    seeds, so the mixes may train side by side in processes of their own."""
    import torch

    torch.set_num_threads(threads)
    out = Path(out)
    name, mix_cfg = list(cfg.mixes.items())[k]
    data = [encode(tokenizer, e, cfg) for e in mix(ExperienceStore.open(store_dir), mix_cfg, cfg.seed + k)]
    model = build_model(cfg, tokenizer)
    entries: dict[str, dict] = {}
    t0 = time.perf_counter()

    def save(step: int, loss: float) -> None:
        ckpt = checkpoint_name(name, step)
        tmp = out / f".{ckpt}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tokenizer.save_pretrained(tmp)
        model.save_pretrained(tmp)
        shutil.rmtree(out / ckpt, ignore_errors=True)
        tmp.rename(out / ckpt)
        entries[ckpt] = {"mix": name, "step": step, "train_loss": round(loss, 4), "examples": len(data),
                         "parameters": sum(p.numel() for p in model.parameters())}
        print(f"{ckpt}: loss {loss:.3f} ({time.perf_counter() - t0:.0f}s)", flush=True)

    train_mix(model, tokenizer, data, cfg, cfg.seed + 1000 + k, save)
    return entries


def mixes_to_train(out: str | Path, record: dict, cfg: LMConfig) -> list[int]:
    """The mixes (indices into ``cfg.mixes``) with a checkpoint not yet saved and recorded: an
    interrupted build retrains only those."""
    out = Path(out)
    return [k for k, name in enumerate(cfg.mixes)
            if not all((out / n / "config.json").is_file() and n in record
                       for n in (checkpoint_name(name, s) for s in cfg.save_at))]
