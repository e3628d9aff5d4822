"""The ``hf:<dir>`` kind: a local causal LM run with transformers, prompted through its chat
template and sampled with the settings of ``HFSettings``.

``<dir>`` is a model directory (``config.json`` + weights + tokenizer) or a directory (or
file) with one GGUF checkpoint, such as the packaged SmolLM2-135M. A GGUF checkpoint is
converted once into a plain model directory under ``convert_cache_dir`` (loading GGUF takes
about 20 s on 2 cores, the converted directory about 3 s).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any, Sequence

from enigma.agents.config import HFSettings
from enigma.agents.errors import AgentSpecError
from enigma.agents.fingerprint import digest, file_identity, tree_identity
from enigma.dialogue import History
from enigma.model_loading import MODEL_LOAD_LOCK

log = logging.getLogger(__name__)

_ROLE = {"user": "user", "agent": "assistant"}

# What generate() applies when neither the model's generation config nor the call sets top_k
# (transformers' GenerationConfig default); the draws keep it, so the agent's policy is unchanged.
_GENERATE_DEFAULT_TOP_K = 50

# Named in the fingerprint: replies drawn before per-reply generators (one torch global generator
# per call) are other draws, and a cache must not mix the two.
DRAWS = "per-reply generator, inverse CDF (issue 72)"


def row_seed(seed: int, reply: int) -> int:
    """The seed of reply ``reply`` of a call seeded ``seed``: its own generator's, so that the
    reply's draws do not depend on which other replies share its ``generate`` call."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{reply}".encode()).digest()[:8], "big") & (2**63 - 1)


class _RowDraws:
    """A logits processor that draws every row's next token itself, from what generate's sampling
    would draw from (temperature, then top-k, then top-p: transformers' warpers, in that order),
    inverting the row's cumulative distribution at the row's own uniform for this step. It returns
    a one-hot score, so a greedy ``generate`` keeps that token.

    ``uniforms``: [rows, max_new_tokens] float64, each row from its own generator; ``width``: the
    padded prompt length (the step is ``input_ids.shape[1] - width``). With top-k the nucleus is
    cut from the k best tokens only (the others have no mass after top-k anyway): no sort of the
    whole vocabulary per step. (Where scores tie at the k-th, transformers' top-k keeps every tied
    token and this keeps k: a difference only for exactly equal float scores.)"""

    def __init__(self, uniforms: Any, width: int, temperature: float, top_k: int | None, top_p: float):
        self.uniforms, self.width = uniforms, width
        self.temperature, self.top_k, self.top_p = temperature, top_k, top_p

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        step = input_ids.shape[1] - self.width
        if self.top_k and self.top_k < scores.shape[-1]:
            best, token_of = torch.topk(scores, self.top_k, dim=-1)  # sorted, best first
        else:
            best, token_of = torch.sort(scores, dim=-1, descending=True, stable=True)
        # float64, one row at a time in effect: a row's draw does not depend on its batch
        probs = torch.softmax(best.double() / self.temperature, dim=-1)
        if self.top_p < 1.0:
            before = probs.cumsum(dim=-1) - probs  # mass of the better tokens
            probs = probs * (before < self.top_p)  # the smallest set with mass >= top_p (the best always)
        cdf = probs.cumsum(dim=-1)
        target = self.uniforms[:, step : step + 1] * cdf[:, -1:]
        pos = torch.searchsorted(cdf, target, right=True)
        # u * total can round up to the total: then the last token with any mass
        pos = torch.minimum(pos, (probs > 0).sum(dim=-1, keepdim=True) - 1)
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(-1, token_of.gather(-1, pos), 0.0)


def chat_messages(history: History, max_history_turns: int, system_prompt: str | None = None) -> list[dict[str, str]]:
    """The chat messages a checkpoint is prompted with: the last ``max_history_turns`` turns (0: none)
    and the system prompt (``enigma.lm`` trains its models on the same)."""
    turns = list(history)[-max_history_turns:] if max_history_turns else []
    messages = [{"role": _ROLE[t.role], "content": t.text} for t in turns]
    if system_prompt or not messages:
        # An opening has no turns, and chat templates refuse an empty conversation: it is
        # prompted by the system message alone (empty unless one is configured).
        messages.insert(0, {"role": "system", "content": system_prompt or ""})
    return messages


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
                self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, self.settings.dtype))
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
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self._eos = [] if eos is None else [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])]
        top_k = getattr(self.model.generation_config, "top_k", None)
        self._top_k = _GENERATE_DEFAULT_TOP_K if top_k is None else top_k
        # one generate call at a time (the server may call from several threads)
        self._lock = threading.Lock()

    @property
    def batch_size(self) -> int:
        """Replies per generate call: the sampler hands ``respond_batch`` at least this many."""
        return self.settings.batch_size

    def prompt(self, history: History) -> str:
        messages = chat_messages(history, self.settings.max_history_turns, self.settings.system_prompt)
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def _prompt_ids(self, history: History) -> list[int]:
        """The prompt's token ids, cut on the left to leave room for the reply in the window."""
        ids = self.tokenizer(self.prompt(history), add_special_tokens=False)["input_ids"]
        if self._max_positions and len(ids) + self.settings.max_new_tokens > self._max_positions:
            ids = ids[-max(1, self._max_positions - self.settings.max_new_tokens) :]
        return list(ids)

    def respond(self, history: History, n: int = 1, seed: int | None = None) -> list[str]:
        return self.respond_batch([history], n, [seed])[0]

    # The sampler records, per reply, whether it was cut at max_new_tokens (``respond_batch``'s
    # ``with_limit``): an early checkpoint that never ends a reply shows in the estimate's summary.
    records_token_limit = True

    def respond_batch(self, histories: Sequence[History], n: int | Sequence[int] = 1,
                      seeds: Sequence[int | None] | None = None, with_limit: bool = False) -> list[list[Any]]:
        """``respond(histories[i], n[i], seeds[i])`` for every i, in ``generate`` calls of at most
        ``batch_size`` replies (left-padded prompts, the shortest together). Reply ``r`` of history
        ``i`` is drawn with a generator of its own, seeded from ``(seeds[i], r)`` (``row_seed``):
        its tokens depend on that seed and the history only, not on the batch it was drawn in.
        ``with_limit``: each reply as ``(text, cut)``, ``cut`` true when generation stopped at
        ``max_new_tokens`` rather than at an end-of-sequence token."""
        import torch

        ns = [n] * len(histories) if isinstance(n, int) else list(n)
        seeds = [None] * len(histories) if seeds is None else list(seeds)
        if not len(ns) == len(seeds) == len(histories):
            raise ValueError(f"respond_batch: {len(histories)} histories, {len(ns)} n, {len(seeds)} seeds")
        if any(k < 1 for k in ns):
            raise ValueError(f"respond_batch: n must be at least 1, got {ns}")
        prompts = [self._prompt_ids(h) for h in histories]
        out: list[list[tuple[str, bool] | None]] = [[None] * k for k in ns]
        with self._lock, torch.inference_mode():
            if self.settings.do_sample:
                # seed None: a fresh seed from torch's global generator (torch.manual_seed still replays it)
                seeds = [int(torch.randint(0, 2**31 - 1, ()).item()) if s is None else s for s in seeds]
                rows = [(i, r) for i, k in enumerate(ns) for r in range(k)]
                rows.sort(key=lambda ir: len(prompts[ir[0]]))  # stable: equal lengths keep their order
                for start in range(0, len(rows), self.settings.batch_size):
                    part = rows[start : start + self.settings.batch_size]
                    got = self._sample([prompts[i] for i, _ in part], [row_seed(seeds[i], r) for i, r in part])
                    for (i, r), reply in zip(part, got):
                        out[i][r] = reply
            else:
                # beam search (n beams for n replies), as before: one batch per n, as wide as batch_size allows
                by_n: dict[int, list[int]] = {}
                for i, k in enumerate(ns):
                    by_n.setdefault(k, []).append(i)
                for k, idx in by_n.items():
                    idx.sort(key=lambda i: len(prompts[i]))
                    per = max(1, self.settings.batch_size // k)
                    for start in range(0, len(idx), per):
                        part = idx[start : start + per]
                        got = self._generate([prompts[i] for i in part], num_beams=k, num_return_sequences=k)
                        for j, i in enumerate(part):
                            out[i] = got[j * k : (j + 1) * k]
        if with_limit:
            return out  # type: ignore[return-value]
        return [[text for text, _ in replies] for replies in out]  # type: ignore[misc]

    def _sample(self, prompts: list[list[int]], seeds: list[int]) -> list[tuple[str, bool]]:
        import torch

        s = self.settings
        uniforms = torch.stack([torch.rand(s.max_new_tokens, dtype=torch.float64,
                                           generator=torch.Generator().manual_seed(seed)) for seed in seeds])
        width = max(len(p) for p in prompts)
        draw = _RowDraws(uniforms.to(self.device), width, s.temperature, self._top_k, s.top_p)
        # greedy over the one token each row drew: generate's own sampling (one global generator
        # for the whole batch) is not used
        return self._generate(prompts, logits_processor=[draw])

    def _generate(self, prompts: list[list[int]], **kw: Any) -> list[tuple[str, bool]]:
        """Each prompt's reply, and whether it was cut at ``max_new_tokens``."""
        import torch

        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for j, p in enumerate(prompts):  # left padding: every prompt ends where the reply starts
            ids[j, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[j, width - len(p) :] = 1
        gen = self.model.generate(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                                  max_new_tokens=self.settings.max_new_tokens, pad_token_id=self._pad,
                                  do_sample=False, **kw)
        new = gen[:, width:]
        texts = [t.strip() for t in self.tokenizer.batch_decode(new, skip_special_tokens=True)]
        # a reply that ended has an end-of-sequence token (generate pads after it); one without
        # any ran the full max_new_tokens
        if self._eos:
            ended = torch.isin(new, torch.tensor(self._eos, device=new.device)).any(dim=1).tolist()
        else:
            ended = [False] * len(texts)
        full = new.shape[1] >= self.settings.max_new_tokens
        return [(t, full and not e) for t, e in zip(texts, ended)]

    def fingerprint_parts(self) -> dict[str, Any]:
        return {
            "checkpoint": self.source_files,
            # the device is left out: draws on another device are equally valid samples of the agent
            # nor the batch size: a reply's draws do not depend on its batch
            "settings": self.settings.model_dump(exclude={"convert_cache_dir", "device", "batch_size"}),
            "draws": DRAWS,
        }

    def __repr__(self) -> str:
        return f"HFAgent({str(self.path)!r})"
