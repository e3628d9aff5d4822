"""Typed settings for the agent kinds (under ``sample.agents`` in params.yaml) and for
``enigma serve`` (section ``serve``), and which specs are retrieval stand-ins: a rule of the
settings alone, which params.yaml's check of a benchmark's knowledge base reads."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HFSettings(_Strict):
    max_new_tokens: int = Field(40, ge=1)
    do_sample: bool = True
    temperature: float = Field(0.7, gt=0)
    top_p: float = Field(0.9, gt=0, le=1)
    # Keeps the prompt inside the model's window: only the last turns are shown.
    max_history_turns: int = Field(8, ge=0)
    system_prompt: str | None = None
    # Used only when the tokenizer ships no chat template of its own.
    chat_template: str | None = None
    # "auto": the GPU when there is one, else the CPU; or any torch device string.
    device: str = "auto"
    # The weights' and activations' type. bfloat16 is another agent (other replies, another
    # fingerprint), faster on CPUs with AVX512-BF16 (studies/results/hf_batch_throughput.md).
    dtype: Literal["float32", "bfloat16"] = "float32"
    # Replies per generate call (left-padded prompts, the shortest together). Each reply draws
    # from a generator of its own, so the batch size changes no draw (docs/agents.md#batched-generation-hf).
    # 16: two batches per cache part of 32 calls, sorted by length, the fastest measured on CPU.
    batch_size: int = Field(16, ge=1)
    # Where GGUF checkpoints are converted once to a plain model directory (fast later loads).
    convert_cache_dir: str = "cache/hf-converted"


class OpenAISettings(_Strict):
    # The *name* of the environment variable holding the key; the key itself never goes
    # into params, logs or reports.
    api_key_env: str = "ENIGMA_OPENAI_API_KEY"
    timeout_s: float = Field(30.0, gt=0)
    connect_timeout_s: float = Field(5.0, gt=0)
    max_retries: int = Field(3, ge=0)
    backoff_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(8.0, ge=0)
    # A 429 or 503 (any retried status) with ``Retry-After`` (seconds or an HTTP date) is retried
    # after the wait the server asks for, not the backoff, if that wait is at most this; a longer
    # one (a quota reset tomorrow: ``Retry-After: 86400``) fails the call at once, naming the wait,
    # instead of asking again before the server said to or blocking the run for a day.
    retry_after_max_s: float = Field(60.0, ge=0)
    concurrency: int = Field(4, ge=1)
    temperature: float = Field(0.7, ge=0)
    top_p: float = Field(0.9, gt=0, le=1)
    max_tokens: int = Field(64, ge=1)


class TranscriptSettings(_Strict):
    encoder: str = "minilm"
    embed_cache_dir: str | None = "cache/embeddings"
    # How many of the last turns make up the "preceding context" that is matched.
    context_turns: int = Field(2, ge=1)
    # Samples are drawn uniformly among the k nearest contexts (1: always the nearest).
    top_k: int = Field(1, ge=1)
    # Self-play transcripts have the agent on both sides, so every turn is its own reply.
    both_sides: bool = True
    # Record with each retrieved reply the conversation the stand-in's agent said it in (every
    # turn before it; on support, before the reply it snapped from), as the target table's
    # ``source_context``: ENIGMA then reads the reply in that conversation, not in the logged one
    # whose state retrieved it. On by default, as params.yaml and docs/agents.md have it (until issue
    # 73 the package's own default was off). Off, the agent's fingerprint is what it was before this
    # setting existed.
    sources: bool = True


class PythonSettings(_Strict):
    # Sampling runs each python: agent in a worker process of its own, started once and reused for
    # every call (enigma.agents.isolated), so that an agent that ends its process (os._exit, a crash)
    # or hangs is `error: agent <spec>: ...`, exit 2, not a silent end or a run that never returns.
    # false: in the command's own process (to step through an agent in a debugger); no timeouts then.
    isolate: bool = True
    # A call (one state's replies) not answered within this: the agent hangs; its process is stopped.
    call_timeout_s: float = Field(300.0, gt=0)
    # The same for importing the agent's module and calling its factory (which may load a model).
    load_timeout_s: float = Field(600.0, gt=0)


class AgentSettings(_Strict):
    python: PythonSettings = PythonSettings()
    hf: HFSettings = HFSettings()
    openai: OpenAISettings = OpenAISettings()
    transcripts: TranscriptSettings = TranscriptSettings()


class ServeSettings(_Strict):
    """Section ``serve`` of params.yaml: the limits ``enigma serve`` puts on every request.

    A section of its own rather than part of ``sample``: the DVC sampling stages depend on the
    whole ``sample`` section, and a server limit changes no sample."""

    # Larger request bodies are refused with 413 before they are parsed.
    max_body_bytes: int = Field(1_000_000, ge=1)
    # An agent call not answered within this (waiting for a free call slot included) gets 504.
    request_timeout_s: float = Field(60.0, gt=0)
    # Agent calls running at once. A call past its timeout cannot be stopped (it is a Python
    # thread); it keeps its slot until it returns, so hung calls never pile up threads.
    max_concurrent_calls: int = Field(8, ge=1)
    # Host headers answered besides 127.0.0.1, localhost, [::1] and the bound address (each with
    # the port): "name" (any port), "name:port", or "*" (any). Any other Host gets 400, so a web
    # page cannot reach the server by DNS rebinding. Empty on a server bound to every interface
    # (--host 0.0.0.0): any host, since its names are unknown here; list them to restrict it.
    allowed_hosts: list[str] = []

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, hosts: list[str]) -> list[str]:
        for h in hosts:
            if not h.strip() or any(c.isspace() or c in "/@?#" for c in h.strip()):
                raise ValueError(f"{h!r}: expected a host name or address, optionally with :port, or '*'")
        return hosts


# Labels shown wherever a kind's results appear (reports, MLflow tags, sampling output).
APPROXIMATION_LABEL = {
    "transcripts": "approximation: retrieval stand-in built from the agent's own transcripts",
    "transcripts-onsupport": "approximation: retrieval stand-in snapped to the nearest logged reply",
}


def is_retrieval_stand_in(spec: str) -> bool:
    """Whether the spec's agent answers with replies retrieved from other conversations (its
    kind is one of ``APPROXIMATION_LABEL``'s), read off the kind alone so that it never raises."""
    return spec.partition(":")[0] in APPROXIMATION_LABEL


def unsourced_stand_in(spec: str, settings: AgentSettings) -> bool:
    """Whether the spec's agent is a retrieval stand-in that does not say where its replies were
    said (``transcripts.sources`` off): a knowledge base would judge such replies against
    customers they never answered (``enigma.encoders.config.STAND_IN_REFUSAL``)."""
    return is_retrieval_stand_in(spec) and not settings.transcripts.sources
