"""The ``openai:<base-url>#<model>`` kind: any server speaking the OpenAI-compatible
chat-completions API (vLLM, llama.cpp server, ``enigma serve``).

Timeouts, retries with exponential backoff and jitter (on connection errors, timeouts, 429
and 5xx; an answer with ``Retry-After`` is retried after the wait it asks for, up to
``retry_after_max_s``, and fails at once past that), bounded concurrency (``concurrency``
requests in flight; the sampler uses as many threads). Servers that ignore ``n`` are asked
again for the remainder.

The API key is read from the environment variable named in the settings (stripped and checked
there: ``enigma.agents.apikey``), sent only in the Authorization header, and scrubbed from every
error message before anything is cut short; ``repr`` shows only whether it is set. Credentials in
the base URL (``http://user:password@host/v1``, sent by the HTTP client as Basic auth) are held
the same way: ``base_url``, ``url``, ``repr``, the fingerprint's parts and every message show the
URL with ``***`` in their place, and they are scrubbed from what a server echoes back (as they are
and as the Basic token).
"""

from __future__ import annotations

import base64
import email.utils
import math
import random
import threading
import time
from datetime import datetime, timezone
from typing import Any

from enigma.agents.apikey import Secret, read_api_key
from enigma.agents.config import OpenAISettings
from enigma.agents.errors import AgentCallError, AgentSpecError
from enigma.dialogue import History
from enigma.redaction import redact_userinfo

_ROLE = {"user": "user", "agent": "assistant"}
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_SNIPPET = 200


def retry_after_s(value: str | None, now: datetime | None = None) -> float | None:
    """The wait a ``Retry-After`` header asks for, in seconds (``120``, or an HTTP date such as
    ``Wed, 21 Oct 2026 07:28:00 GMT``: the time until then, 0 if past); None when there is no
    header or it is neither."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # an HTTP date is GMT
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(seconds, 0.0)


def _url_secrets(url) -> list[Secret]:
    """The credentials of an ``httpx.URL`` in the forms a message can hold them: the user
    information as written (percent-encoded) and decoded, the password (or, with none, the user:
    a token), and the Basic token the HTTP client makes of them."""
    user, password = url.username, url.password
    if not (user or password):
        return []
    raw = url.userinfo.decode("ascii", "replace")
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    values = {raw, f"{user}:{password}", password or user, basic}
    return [Secret(v) for v in values if v]


class OpenAIAgent:
    def __init__(self, base_url: str, model: str, settings: OpenAISettings | None = None):
        import httpx

        shown = redact_userinfo(base_url.rstrip("/"))
        if not model:
            raise AgentSpecError(f"openai agent at {shown}: model name missing (use '#<model>')")
        self.settings = settings or OpenAISettings()
        self.base_url = shown  # what is shown; the request goes to _url, credentials and all
        self.model = model
        self.url = f"{shown}/chat/completions"
        self._url = f"{base_url.rstrip('/')}/chat/completions"
        try:
            parsed = httpx.URL(self._url)
        except httpx.InvalidURL as exc:
            raise AgentSpecError(redact_userinfo(f"openai agent at {shown!r}: not a valid URL ({exc})")) from None
        self._key = read_api_key(self.settings.api_key_env)
        self._url_secrets = _url_secrets(parsed)
        self.concurrency = self.settings.concurrency
        self._sem = threading.BoundedSemaphore(self.settings.concurrency)
        self._client = httpx.Client(
            timeout=httpx.Timeout(self.settings.timeout_s, connect=self.settings.connect_timeout_s),
            limits=httpx.Limits(max_connections=self.settings.concurrency, max_keepalive_connections=self.settings.concurrency),
        )

    # ---- helpers -------------------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        for secret in (self._key, *self._url_secrets):
            text = secret.scrub(text)
        return redact_userinfo(text)

    def _snippet(self, text: str) -> str:
        # scrubbed first: a cut could split the key into pieces the scrub no longer sees whole
        return repr(self._scrub(text)[:_SNIPPET])

    def _fail(self, msg: str) -> AgentCallError:
        return AgentCallError(self._scrub(f"{self.url} (model {self.model!r}): {msg}"))

    def _headers(self) -> dict[str, str]:
        key = self._key.get()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _post(self, body: dict[str, Any]) -> list[str]:
        import httpx

        s = self.settings
        last = "no attempt made"
        asked: float | None = None  # the wait the last answer's Retry-After asked for
        for attempt in range(s.max_retries + 1):
            if attempt and asked is not None:
                time.sleep(asked)  # what the server asked for, not less (and no jitter below it)
            elif attempt:
                delay = min(s.backoff_s * 2 ** (attempt - 1), s.backoff_max_s)
                time.sleep(delay * (0.5 + random.random() / 2))
            asked = None
            try:
                with self._sem:
                    r = self._client.post(self._url, json=body, headers=self._headers())
            except httpx.TimeoutException:
                last = f"timed out after {s.timeout_s:g}s"
                continue
            except httpx.LocalProtocolError as exc:  # our own request is malformed: asking again cannot help
                raise self._fail(f"request refused by the HTTP client, not sent ({type(exc).__name__}: {exc})") from None
            except httpx.ConnectError as exc:
                last = f"cannot connect ({type(exc).__name__}: {exc})"
                continue
            except httpx.TransportError as exc:  # connected, then the exchange broke off
                last = f"connection failed ({type(exc).__name__}: {exc})"
                continue
            if r.status_code in _RETRY_STATUS:
                last = f"HTTP {r.status_code}: {self._snippet(r.text)}"
                asked = retry_after_s(r.headers.get("retry-after"))
                if asked is not None and asked > s.retry_after_max_s:
                    raise self._fail(f"{last}; the server asks to wait {asked:g}s before asking again (Retry-After), "
                                     f"over sample.agents.openai.retry_after_max_s = {s.retry_after_max_s:g}s: not retried")
                continue
            if r.status_code >= 400:
                raise self._fail(f"HTTP {r.status_code}: {self._snippet(r.text)}")
            return self._parse(r)
        raise self._fail(f"no answer after {s.max_retries + 1} attempt(s); last: {last}")

    def _parse(self, r) -> list[str]:
        try:
            data = r.json()
        except ValueError:
            raise self._fail(f"answer is not JSON: {self._snippet(r.text)}") from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices:
            raise self._fail(f"answer has no 'choices' list: {self._snippet(str(data))}")
        out = []
        for i, choice in enumerate(choices):
            message = choice.get("message") if isinstance(choice, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            if content is not None and not isinstance(content, str):
                raise self._fail(f"choices[{i}].message.content is {type(content).__name__}, not a string")
            if content is None and not isinstance(message, dict):
                raise self._fail(f"choices[{i}] has no message: {self._snippet(str(choice))}")
            out.append(content or "")  # an empty reply is reported by the sampler per sample
        return out

    # ---- Agent ---------------------------------------------------------------------------
    def respond(self, history: History, n: int = 1, seed: int | None = None) -> list[str]:
        s = self.settings
        messages = [{"role": _ROLE[t.role], "content": t.text} for t in history]
        replies: list[str] = []
        for round_ in range(n):  # at most n rounds even if the server returns one choice each
            body: dict[str, Any] = {
                "model": self.model,
                "messages": messages,
                "n": n - len(replies),
                "temperature": s.temperature,
                "top_p": s.top_p,
                "max_tokens": s.max_tokens,
            }
            if seed is not None:
                body["seed"] = seed + round_
            replies += self._post(body)
            if len(replies) >= n:
                break
        return replies[:n]

    def close(self) -> None:
        self._client.close()

    def fingerprint_parts(self) -> dict[str, Any]:
        # The key is deliberately absent: it does not change the agent, and must not leak.
        return {"base_url": self.base_url, "model": self.model,
                "settings": self.settings.model_dump(include={"temperature", "top_p", "max_tokens"})}

    def __repr__(self) -> str:
        return f"OpenAIAgent({self.base_url!r}, model={self.model!r}, key from ${self.settings.api_key_env}: {self._key!r})"
