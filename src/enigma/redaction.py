"""Credentials written into URLs (``http://user:password@host/v1``) kept out of everything
shown or stored: messages, logs, reports, cache metadata (issue 73, item 9).

An ``openai:<base-url>#<model>`` spec may carry a user and password in its URL; the HTTP client
needs them (it sends them as Basic auth), nothing else does. ``redact_userinfo`` replaces the
user-information part of every URL in a text by ``***``, so a spec can be shown as
``openai:http://***@host/v1#m``. It is a pure function of the text, imports nothing, and leaves
a text without credentials as it is (a spec without them, and so its fingerprint, unchanged).
"""

from __future__ import annotations

import re

REDACTED = "***"

# scheme "://" userinfo "@": the userinfo runs to the last "@" before the path, query or
# fragment (as URL parsers read "user:p@ss@host"), so a password with an "@" is hidden whole
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/?#\s]*@")


def redact_userinfo(text: str) -> str:
    """``text`` with the user information of every URL in it (``user:password@``) replaced by
    ``***@``."""
    return _USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
