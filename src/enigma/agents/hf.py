"""The ``hf:<dir>`` kind: a local causal LM run with transformers, prompted through its chat
template and sampled with the settings of ``HFSettings``.

``<dir>`` is a model directory (``config.json`` + weights + tokenizer) or a directory (or
file) with one GGUF checkpoint, such as the packaged SmolLM2-135M. A GGUF checkpoint is
converted once into a plain model directory under ``convert_cache_dir`` (loading GGUF takes
about 20 s on 2 cores, the converted directory about 3 s).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any

from enigma.agents.config import HFSettings
from enigma.agents.errors import AgentSpecError
from enigma.agents.fingerprint import digest, file_identity, tree_identity
from enigma.dialogue import History
from enigma.model_loading import MODEL_LOAD_LOCK

log = logging.getLogger(__name__)

_ROLE = {"user": "user", "agent": "assistant"}


def _find_checkpoint(path: Path) -> tuple[Path | None, Path | None]:
    """(model dir, gguf file): exactly one of them is set."""
    if not path.exists():
        raise AgentSpecError(f"hf checkpoint {path}: not found")
    if path.is_file():
        if path.suffix != ".gguf":
            raise AgentSpecError(f"hf checkpoint {path}: a file must be a .gguf checkpoint; otherwise give the model directory")
        return None, path
    if (path / "config.json").is_file():
        return path, None
    ggufs = sorted(path.glob("*.gguf"))
    if len(ggufs) == 1:
        return None, ggufs[0]
    if len(ggufs) > 1:
        raise AgentSpecError(f"hf checkpoint {path}: {len(ggufs)} .gguf files; name one: hf:{ggufs[0]}")
    raise AgentSpecError(f"hf checkpoint {path}: no config.json and no .gguf file (not a model directory)")


def convert_gguf(gguf: Path, cache_dir: Path) -> Path:
    """Convert a GGUF checkpoint once into a plain model directory; later calls reuse it."""
    ident = file_identity(gguf)
    out = cache_dir / f"{gguf.stem}-{digest(ident)}"
    if (out / "config.json").is_file():
        return out
    log.info("converting %s to a model directory in %s (once)", gguf, out)
    tmp = cache_dir / f".{out.name}-{uuid.uuid4().hex}"
    try:
        with MODEL_LOAD_LOCK:  # transformers' lazy import is not thread-safe (enigma.model_loading)
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # transformers dequantises GGUF tensors on load, yet keeps the GGUF quantiser attached,
        # which refuses to save: the weights are plain floats, so drop it and save them as such.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        if hasattr(model, "is_quantized"):
            model.is_quantized = False
        tok.save_pretrained(tmp)
        model.save_pretrained(tmp)
        os.replace(tmp, out)  # atomic: a concurrent or interrupted conversion never leaves half a dir
    except OSError:
        if not (out / "config.json").is_file():
            raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


class HFAgent:
    def __init__(self, path: str | Path, settings: HFSettings | None = None):
        self.settings = settings or HFSettings()
        self.path = Path(path)
        model_dir, gguf = _find_checkpoint(self.path)
        self.source_files = tree_identity(gguf if gguf is not None else model_dir)
        if gguf is not None:
            model_dir = convert_gguf(gguf, Path(self.settings.convert_cache_dir))
        self.model_dir = model_dir

        import torch

        try:
            with MODEL_LOAD_LOCK:  # transformers' lazy import is not thread-safe (enigma.model_loading)
                from transformers import AutoModelForCausalLM, AutoTokenizer

                self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
                self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        except (OSError, ValueError) as exc:
            raise AgentSpecError(f"hf checkpoint {self.path}: cannot load ({exc})") from exc
        device = self.settings.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            self.device = torch.device(device)
            self.model.to(self.device)
        except (RuntimeError, ValueError) as exc:
            raise AgentSpecError(f"hf checkpoint {self.path}: device {device!r} unusable ({exc})") from exc
        self.model.eval()
        if self.settings.chat_template:
            self.tokenizer.chat_template = self.settings.chat_template
        if not getattr(self.tokenizer, "chat_template", None):
            raise AgentSpecError(
                f"hf checkpoint {self.path}: the tokenizer has no chat template; give one in "
                "params.yaml (sample.agents.hf.chat_template)"
            )
        self._pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        self._max_positions = getattr(self.model.config, "max_position_embeddings", None) or getattr(
            self.model.config, "n_positions", None
        )
        # generate() draws from torch's global generator: one call at a time keeps seeds exact.
        self._lock = threading.Lock()

    def prompt(self, history: History) -> str:
        turns = list(history)[-self.settings.max_history_turns :] if self.settings.max_history_turns else []
        messages = [{"role": _ROLE[t.role], "content": t.text} for t in turns]
        if self.settings.system_prompt or not messages:
            # An opening has no turns, and chat templates refuse an empty conversation: it is
            # prompted by the system message alone (empty unless one is configured).
            messages.insert(0, {"role": "system", "content": self.settings.system_prompt or ""})
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def respond(self, history: History, n: int = 1, seed: int | None = None) -> list[str]:
        import torch

        s = self.settings
        enc = self.tokenizer(self.prompt(history), return_tensors="pt", add_special_tokens=False)
        ids, mask = enc["input_ids"], enc["attention_mask"]
        if self._max_positions and ids.shape[1] + s.max_new_tokens > self._max_positions:
            keep = max(1, self._max_positions - s.max_new_tokens)
            ids, mask = ids[:, -keep:], mask[:, -keep:]
        gen: dict[str, Any] = {"max_new_tokens": s.max_new_tokens, "num_return_sequences": n, "pad_token_id": self._pad}
        if s.do_sample:
            gen.update(do_sample=True, temperature=s.temperature, top_p=s.top_p)
        else:
            gen.update(do_sample=False, num_beams=max(1, n))
        with self._lock, torch.inference_mode():
            if seed is not None:
                torch.manual_seed(seed)
            out = self.model.generate(input_ids=ids.to(self.device), attention_mask=mask.to(self.device), **gen)
        new = out[:, ids.shape[1] :]
        return [t.strip() for t in self.tokenizer.batch_decode(new, skip_special_tokens=True)]

    def fingerprint_parts(self) -> dict[str, Any]:
        return {
            "checkpoint": self.source_files,
            # the device is left out: draws on another device are equally valid samples of the agent
            "settings": self.settings.model_dump(exclude={"convert_cache_dir", "device"}),
        }

    def __repr__(self) -> str:
        return f"HFAgent({str(self.path)!r})"
