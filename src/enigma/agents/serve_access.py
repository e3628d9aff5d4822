"""What may reach ``enigma serve`` (``enigma.agents.server``), checked before a request gets to the
agent: the address it listens on (``check_bind``, before the agent loads), the ``Host`` header
(``AllowedHosts``, ``HostCheck``: a page in the user's browser must not drive a local server,
issue 73 item 13) and the body's size (``BodyLimit``: 413 past ``serve.max_body_bytes``); and the
error body every refusal answers with (``error_response``, OpenAI's shape)."""

import ipaddress
import socket
from typing import Sequence


def error_response(status: int, message: str, kind: str, error_id: str | None = None):
    from fastapi.responses import JSONResponse

    err = {"message": message, "type": kind}
    if error_id:
        err["id"] = error_id
    return JSONResponse(status_code=status, content={"error": err})


class BodyLimit:
    """ASGI middleware: reads a request body up to ``max_bytes`` and answers 413 past that,
    whether the size is declared (Content-Length) or not (chunked)."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await self._refuse(scope, receive, send)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                return await self._refuse(scope, receive, send)
            if not message.get("more_body"):
                break
        body, delivered = b"".join(chunks), False

        async def replay():
            nonlocal delivered
            if delivered:
                return await receive()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope, receive, send):
        message = f"request body over the limit of {self.max_bytes} bytes (serve.max_body_bytes)"
        await error_response(413, message, "invalid_request_error")(scope, receive, send)


class AllowedHosts:
    """The ``Host`` headers a server bound to ``bind_host``:``port`` answers: ``127.0.0.1``,
    ``localhost`` and ``[::1]`` and the bound address itself, each with the port (without it on
    port 80), and the entries of ``serve.allowed_hosts`` (``name``: any port; ``name:port``; ``*``:
    any host). Bound to every interface (``0.0.0.0``, ``::``) with no entries, any host: such a
    server is meant to be reached by names it cannot know (a warning asks for a key)."""

    LOOPBACK = ("127.0.0.1", "localhost", "[::1]")

    def __init__(self, bind_host: str, port: int, extra: Sequence[str] = ()):
        extra = [e.strip().lower() for e in extra]
        self.any = "*" in extra or (_is_wildcard(bind_host) and not extra)
        names = list(self.LOOPBACK)
        if not _is_wildcard(bind_host):
            names.append(_as_host_header(bind_host.strip().lower()))
        self.exact = {f"{n}:{port}" for n in names} | (set(names) if port == 80 else set())
        self.exact |= {e for e in extra if _split_port(e)[1] is not None}
        self.any_port = {e for e in extra if e != "*" and _split_port(e)[1] is None}
        self.shown = sorted(self.exact) + [f"{n} (any port)" for n in sorted(self.any_port)]

    def allows(self, host: str | None) -> bool:
        if self.any:
            return True
        if not host:
            return False
        host = host.strip().lower()
        return host in self.exact or _split_port(host)[0] in self.any_port


def _is_wildcard(host: str) -> bool:
    host = host.strip()
    if not host:
        return True
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _as_host_header(host: str) -> str:
    """An IPv6 address as a Host header writes it: in brackets."""
    try:
        return f"[{host}]" if ipaddress.ip_address(host).version == 6 else host
    except ValueError:
        return host


def _split_port(host: str) -> tuple[str, str | None]:
    """``("name", "port")`` of ``name:port`` or ``[v6]:port``; ``(host, None)`` without a port."""
    if host.startswith("["):
        end = host.find("]")
        rest = host[end + 1 :] if end >= 0 else ""
        return (host[: end + 1], rest[1:]) if rest.startswith(":") else (host, None)
    name, sep, port = host.rpartition(":")
    return (name, port) if sep and ":" not in name else (host, None)


class HostCheck:
    """ASGI middleware: a request whose ``Host`` header does not name this server gets 400
    before anything else is read (a DNS-rebinding page sends its own name there)."""

    def __init__(self, app, allowed: AllowedHosts):
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self.allowed.any:
            return await self.app(scope, receive, send)
        host = dict(scope["headers"]).get(b"host")
        text = host.decode("latin-1") if host is not None else None
        if self.allowed.allows(text):
            return await self.app(scope, receive, send)
        given = "no Host header" if text is None else f"Host header {text[:100]!r}"
        message = (f"{given}: this server answers only to {', '.join(self.allowed.shown)} "
                   "(serve.allowed_hosts adds names)")
        await error_response(400, message, "invalid_request_error")(scope, receive, send)



def check_bind(host: str, port: int) -> bool:
    """Whether ``enigma serve`` can listen on ``host``:``port`` (every address the host names, as
    uvicorn will), checked before the agent loads: raises ``ValueError`` with one line naming
    ``--host``/``--port`` and the reason (a port out of range, a name that does not resolve, an
    address of another machine, a port in use) where uvicorn would print a traceback or a bare
    ``[Errno 98]``. Returns whether every address is a loopback one (only this machine can call)."""
    if not 1 <= port <= 65535:
        raise ValueError(f"--port {port}: expected a port number from 1 to 65535")
    if not host.strip():
        raise ValueError("--host: empty; expected an address or name of this machine, e.g. 127.0.0.1")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ValueError(f"--host {host!r}: not an address, and no such name ({reason})") from None
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as sock:
            # as asyncio binds it (uvicorn's listener), so that the check agrees with the real bind
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise ValueError(f"--host {host} --port {port}: cannot listen on {address[0]} port {port} "
                                 f"({exc.strerror or exc})") from None
    return all(_is_loopback(info[4][0]) for info in infos)


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback  # "fe80::1%eth0": a zone
    except ValueError:
        return False
