"""API keys read from the environment: cleaned and checked once when read, held so that no
repr shows them, and scrubbed from text in every form the text can hold them.

A key copied from a CRLF ``.env`` file ends in a carriage return. Sent as it is, the HTTP
client refuses the header and quotes it back as bytes (``b'Bearer sk-...\\r'``), a form an
exact-string scrub misses. So the ends are stripped, and a key with whitespace or control
characters inside is refused with a message that names the variable, never the key.
"""

from __future__ import annotations

import json
import os

from enigma.agents.errors import AgentSpecError

# Any run of this many characters of the key is taken for the key: a server that echoes a cut
# or partial Authorization header leaks no more than MIN_FRAGMENT - 1 characters of it.
MIN_FRAGMENT = 8
REDACTED = "***"


def _describe(ch: str) -> str:
    kind = "whitespace" if ch.isspace() else "a control character" if ord(ch) < 0x20 or ord(ch) == 0x7F else "a non-ASCII character"
    return f"{kind} (U+{ord(ch):04X})"


class Secret:
    """Holds a key; ``repr``/``str`` say only whether it is set, ``scrub`` removes it from text."""

    __slots__ = ("_value", "_forms")

    def __init__(self, value: str | None):
        self._value = value or None
        # The forms the key takes inside messages: as is, escaped by repr (str and bytes, which
        # is how httpx quotes a refused header) and by JSON (a server echoing it in a body).
        forms = set()
        if self._value:
            v = self._value
            forms = {v, repr(v)[1:-1], repr(v.encode())[2:-2], json.dumps(v)[1:-1]}
        self._forms = tuple(sorted(forms, key=len, reverse=True))

    def get(self) -> str | None:
        return self._value

    def scrub(self, text: str) -> str:
        """``text`` with every run of MIN_FRAGMENT or more characters of the key (in any of its
        forms) replaced by ``***``. Apply it before cutting a text short: a cut can split the
        key, and the cut-off piece would then no longer match."""
        for form in self._forms:
            text = _redact(text, form)
        return text

    def __repr__(self) -> str:
        return "<set>" if self._value else "<unset>"

    __str__ = __repr__


def _redact(text: str, form: str) -> str:
    k = min(MIN_FRAGMENT, len(form))
    grams = {form[j : j + k] for j in range(len(form) - k + 1)}
    hidden = [False] * len(text)
    for i in range(len(text) - k + 1):
        if text[i : i + k] in grams:
            hidden[i : i + k] = [True] * k
    if not any(hidden):
        return text
    out, i = [], 0
    while i < len(text):
        if hidden[i]:
            while i < len(text) and hidden[i]:
                i += 1
            out.append(REDACTED)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def read_api_key(env_name: str) -> Secret:
    """The key held in ``$env_name``, its ends stripped (unset or blank: no key). Raises
    ``AgentSpecError`` naming the variable when whitespace, control or non-ASCII characters
    remain inside: such a key cannot go into an HTTP header and is a copy-paste accident."""
    raw = os.environ.get(env_name)
    key = (raw or "").strip()
    bad = next((ch for ch in key if not "!" <= ch <= "~"), None)
    if bad is not None:
        raise AgentSpecError(
            f"${env_name}: the API key has {_describe(bad)} inside it; a key is printable ASCII "
            "without spaces (fix the variable; the key is not shown here)"
        )
    return Secret(key)
