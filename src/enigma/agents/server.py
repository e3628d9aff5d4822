"""Serving any agent as an OpenAI-compatible endpoint (``enigma serve``).

Routes: ``GET /v1/models``, ``POST /v1/chat/completions`` (``n`` and ``seed`` honoured; system
messages are dropped because the agent interface has no system turn; ``stream: true`` answers
with server-sent events, each reply whole in one chunk), ``GET /health``.
When ``api_key`` is given, requests must carry it as a Bearer token.

A page in the user's browser must not be able to drive a local server (issue 73, item 13;
the checks are in ``enigma.agents.serve_access``): every request's ``Host`` header must name the
server (``AllowedHosts``: the loopback names and the bound address with its port, plus
``serve.allowed_hosts``; a server bound to every interface takes any host unless that setting is
given), which defeats DNS rebinding; a POST body must be
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
import json
import logging
import threading
import time
import uuid
from typing import Any, Callable, Sequence

from enigma.agents.config import ServeSettings
from enigma.agents.serve_access import AllowedHosts, BodyLimit, HostCheck, error_response
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
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(HostCheck, allowed=AllowedHosts(host, port, settings.allowed_hosts))  # the outer one: first
    calls = _AgentCalls(settings.max_concurrent_calls, settings.request_timeout_s)

    def authorised(request: Request) -> bool:
        if not api_key:
            return True
        given = request.headers.get("authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode())

    def agent_error(status: int, kind: str, what: str, error_id: str):
        return error_response(status, f"{what} (error id {error_id}; the details are in the server's log)", kind, error_id)

    @app.get("/health")
    async def health() -> dict:  # on the event loop: it never waits for a thread
        return {"status": "ok", "model": model_name}

    @app.get("/v1/models")
    async def models(request: Request):
        if not authorised(request):
            return error_response(401, "missing or wrong API key", "authentication_error")
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": 0, "owned_by": "enigma"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        # the body is read here, not declared as a parameter: FastAPI would parse it, and answer
        # 422 to a bad one, before the key is checked
        if not authorised(request):
            return error_response(401, "missing or wrong API key", "authentication_error")
        media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media != "application/json":  # a page can send text/plain or a form anywhere, JSON only after a preflight
            given = f"got {media[:100]!r}" if media else "none given"
            return error_response(415, f"Content-Type: expected application/json ({given})", "invalid_request_error")
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
            return error_response(400, str(exc), "invalid_request_error")
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
