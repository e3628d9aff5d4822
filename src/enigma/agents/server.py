"""Serving any agent as an OpenAI-compatible endpoint (``enigma serve``).

Routes: ``GET /v1/models``, ``POST /v1/chat/completions`` (``n`` and ``seed`` honoured; system
messages are dropped because the agent interface has no system turn; ``stream: true`` answers
with server-sent events, each reply whole in one chunk), ``GET /health``.
When ``api_key`` is given, requests must carry it as a Bearer token.

A page in the user's browser must not be able to drive a local server (issue 73, item 13):
every request's ``Host`` header must name the server (``AllowedHosts``: the loopback names and
the bound address with its port, plus ``serve.allowed_hosts``; a server bound to every interface
takes any host unless that setting is given), which defeats DNS rebinding; a POST body must be
``Content-Type: application/json`` (415 otherwise), which a page can send elsewhere only after a
CORS preflight; and no CORS header is ever sent, so the preflight fails.

The limits come from ``ServeSettings`` (params section ``serve``): bodies over
``max_body_bytes`` get 413; agent calls run in their own threads, at most
``max_concurrent_calls`` at once, and one not answered within ``request_timeout_s`` gets 504,
so a hung agent never holds up ``/health`` (which runs on the event loop). An agent's failure
or malformed answer is logged here with an error id; the client gets a generic message and
that id, never the agent's own exception text.
"""

import asyncio
import hmac
import ipaddress
import json
import logging
import socket
import threading
import time
import uuid
from typing import Any, Callable, Sequence

from enigma.agents.config import ServeSettings
from enigma.dialogue import Turn
from enigma.store.readers.base import unicode_problem

MAX_N = 64

log = logging.getLogger(__name__)


def _content_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # the "content parts" form: keep the text parts
        parts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ValueError(f"{where}.content[{j}]: only text parts are supported")
            parts.append(part["text"])
        return "".join(parts)
    raise ValueError(f"{where}.content: expected a string or a list of text parts")


def history_from_messages(messages: Any) -> list[Turn]:
    if not isinstance(messages, list):
        raise ValueError("messages: expected a list")
    turns = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise ValueError(f"{where}: expected an object with role and content")
        role = m.get("role")
        if role == "system":
            continue
        if role not in ("user", "assistant"):
            raise ValueError(f"{where}.role: {role!r} is not one of system, user, assistant")
        text = _content_text(m.get("content"), where)
        problem = unicode_problem(text)  # JSON's "\ud83d" parses, but no reply quoting it can be sent back
        if problem:
            raise ValueError(f"{where}.content: {problem}")
        turns.append(Turn("user" if role == "user" else "agent", text))
    return turns


class _BodyLimit:
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
        await _error(413, message, "invalid_request_error")(scope, receive, send)


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


class _HostCheck:
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
        await _error(400, message, "invalid_request_error")(scope, receive, send)


def _error(status: int, message: str, kind: str, error_id: str | None = None):
    from fastapi.responses import JSONResponse

    err = {"message": message, "type": kind}
    if error_id:
        err["id"] = error_id
    return JSONResponse(status_code=status, content={"error": err})


class _AgentCalls:
    """Runs agent calls off the event loop, each in a daemon thread (a hung one never blocks
    shutdown), at most ``slots`` at a time, each within ``timeout_s``. A call past its timeout
    is abandoned, not stopped (Python cannot stop a thread): it frees its slot only when it
    returns."""

    def __init__(self, slots: int, timeout_s: float):
        self.timeout_s = timeout_s
        self._slots = asyncio.Semaphore(slots)

    async def run(self, fn: Callable[[], Any]) -> tuple[bool, Any]:
        """``(True, result)`` or ``(False, exception)``; raises ``TimeoutError`` past the timeout."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.timeout_s):
            await self._slots.acquire()
            done = loop.create_future()

            def finish(outcome: tuple[bool, Any]) -> None:
                self._slots.release()
                if not done.done():  # cancelled when the caller timed out
                    done.set_result(outcome)

            def work() -> None:
                try:
                    outcome = (True, fn())
                except BaseException as exc:  # reported to the caller, whatever it is
                    outcome = (False, exc)
                try:
                    loop.call_soon_threadsafe(finish, outcome)
                except RuntimeError:  # the loop is gone: the server has shut down
                    pass

            threading.Thread(target=work, name="enigma-agent-call", daemon=True).start()
            return await done


def _shown(value: Any) -> str:
    """A request's value as an error message quotes it: JSON, cut short."""
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _reply_problem(replies: Any, n: int) -> str | None:
    """What is wrong with an agent's answer to a request for ``n`` replies, or None."""
    if not isinstance(replies, (list, tuple)):
        return f"respond() returned {type(replies).__name__}, not a list of strings"
    if len(replies) < n:
        return f"respond() returned {len(replies)} replies, {n} requested"
    for i, text in enumerate(replies[:n]):
        if not isinstance(text, str):
            return f"reply {i} is {type(text).__name__}, not a string"
        problem = unicode_problem(text)
        if problem:  # it cannot be encoded into the answer
            return f"reply {i} is {problem}"
    return None


def create_app(agent: Any, model_name: str, api_key: str | None = None, settings: ServeSettings | None = None,
               host: str = "127.0.0.1", port: int = 8000):
    """The server's ASGI app; ``host`` and ``port`` are where it is bound (the Host headers it takes)."""
    from fastapi import FastAPI, Request

    settings = settings or ServeSettings()
    app = FastAPI(title=f"enigma serve: {model_name}")
    app.add_middleware(_BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(_HostCheck, allowed=AllowedHosts(host, port, settings.allowed_hosts))  # the outer one: first
    calls = _AgentCalls(settings.max_concurrent_calls, settings.request_timeout_s)

    def authorised(request: Request) -> bool:
        if not api_key:
            return True
        given = request.headers.get("authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode())

    def agent_error(status: int, kind: str, what: str, error_id: str):
        return _error(status, f"{what} (error id {error_id}; the details are in the server's log)", kind, error_id)

    @app.get("/health")
    async def health() -> dict:  # on the event loop: it never waits for a thread
        return {"status": "ok", "model": model_name}

    @app.get("/v1/models")
    async def models(request: Request):
        if not authorised(request):
            return _error(401, "missing or wrong API key", "authentication_error")
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": 0, "owned_by": "enigma"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        # the body is read here, not declared as a parameter: FastAPI would parse it, and answer
        # 422 to a bad one, before the key is checked
        if not authorised(request):
            return _error(401, "missing or wrong API key", "authentication_error")
        media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media != "application/json":  # a page can send text/plain or a form anywhere, JSON only after a preflight
            given = f"got {media[:100]!r}" if media else "none given"
            return _error(415, f"Content-Type: expected application/json ({given})", "invalid_request_error")
        try:
            try:
                body = await request.json()
            except json.JSONDecodeError as exc:
                raise ValueError(f"request body: not valid JSON ({exc.msg} at character {exc.pos})") from None
            except UnicodeDecodeError:
                raise ValueError("request body: not UTF-8") from None
            except RecursionError:
                raise ValueError("request body: JSON nested too deep") from None
            if not isinstance(body, dict):
                raise ValueError(f"request body: expected a JSON object, got {type(body).__name__}")
            history = history_from_messages(body.get("messages"))
            n = body.get("n", 1)
            if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_N:
                raise ValueError(f"n: expected an integer from 1 to {MAX_N}, got {_shown(n)}")
            seed = body.get("seed")
            if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
                raise ValueError(f"seed: expected an integer, got {_shown(seed)}")
            stream = body.get("stream")
            if stream is not None and not isinstance(stream, bool):
                raise ValueError(f"stream: expected true or false, got {_shown(stream)}")
        except ValueError as exc:
            return _error(400, str(exc), "invalid_request_error")
        error_id = uuid.uuid4().hex[:12]
        try:
            ok, replies = await calls.run(lambda: agent.respond(history, n=n, seed=seed))
        except TimeoutError:
            log.error("error id %s: the agent did not answer within %gs (n=%d)", error_id, calls.timeout_s, n)
            return agent_error(504, "timeout", f"the agent did not answer within {calls.timeout_s:g}s", error_id)
        if not ok:
            log.error("error id %s: the agent failed", error_id, exc_info=replies)
            return agent_error(500, "server_error", "the agent failed", error_id)
        problem = _reply_problem(replies, n)
        if problem:
            log.error("error id %s: the agent's answer is malformed: %s", error_id, problem)
            return agent_error(500, "server_error", "the agent returned a malformed answer", error_id)
        head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": model_name}
        if stream:
            from fastapi.responses import StreamingResponse

            return StreamingResponse(_sse_chunks(head, replies[:n]), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        return {
            **head,
            "object": "chat.completion",
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                for i, text in enumerate(replies[:n])
            ],
        }

    return app


def _sse_chunks(head: dict, replies: Sequence[str]):
    """The whole replies as the OpenAI API streams them (server-sent events): per choice one
    ``chat.completion.chunk`` whose delta is the role and all of the text (the agent answers whole
    replies, not tokens), then one chunk per choice with ``finish_reason`` and an empty delta, then
    ``data: [DONE]``."""

    def event(choices: list[dict]) -> bytes:
        return f"data: {json.dumps({**head, 'object': 'chat.completion.chunk', 'choices': choices})}\n\n".encode()

    for i, text in enumerate(replies):
        yield event([{"index": i, "delta": {"role": "assistant", "content": text}, "finish_reason": None}])
    for i in range(len(replies)):
        yield event([{"index": i, "delta": {}, "finish_reason": "stop"}])
    yield b"data: [DONE]\n\n"


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


def serve(agent: Any, model_name: str, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
          log_level: str = "info", settings: ServeSettings | None = None) -> None:
    import copy

    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    # this module's log (agent failures with their tracebacks) goes where uvicorn's own goes
    log_config = copy.deepcopy(LOGGING_CONFIG)
    log_config["loggers"]["enigma"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    uvicorn.run(create_app(agent, model_name, api_key, settings, host=host, port=port), host=host, port=port,
                log_level=log_level,
                log_config=log_config)
