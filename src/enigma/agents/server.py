"""Serving any agent as an OpenAI-compatible endpoint (``enigma serve``).

Routes: ``GET /v1/models``, ``POST /v1/chat/completions`` (``n`` and ``seed`` honoured; system
messages are dropped because the agent interface has no system turn), ``GET /health``.
When ``api_key`` is given, requests must carry it as a Bearer token.
"""


import hmac
import time
import uuid
from typing import Any

from enigma.contracts import Turn

MAX_N = 64


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
        turns.append(Turn("user" if role == "user" else "agent", _content_text(m.get("content"), where)))
    return turns


def create_app(agent: Any, model_name: str, api_key: str | None = None):
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    app = FastAPI(title=f"enigma serve: {model_name}")

    def error(status: int, message: str, kind: str) -> JSONResponse:
        return JSONResponse(status_code=status, content={"error": {"message": message, "type": kind}})

    def authorised(request: Request) -> bool:
        if not api_key:
            return True
        given = request.headers.get("authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode())

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "model": model_name}

    @app.get("/v1/models")
    def models(request: Request):
        if not authorised(request):
            return error(401, "missing or wrong API key", "authentication_error")
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": 0, "owned_by": "enigma"}]}

    @app.post("/v1/chat/completions")
    def chat(request: Request, body: dict[str, Any]):  # a plain def: fastapi runs it in a worker thread
        if not authorised(request):
            return error(401, "missing or wrong API key", "authentication_error")
        try:
            history = history_from_messages(body.get("messages"))
            n = body.get("n", 1)
            if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_N:
                raise ValueError(f"n: expected an integer from 1 to {MAX_N}, got {n!r}")
            seed = body.get("seed")
            if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
                raise ValueError(f"seed: expected an integer, got {seed!r}")
        except ValueError as exc:
            return error(400, str(exc), "invalid_request_error")
        try:
            replies = agent.respond(history, n=n, seed=seed)
        except Exception as exc:  # the agent's failure, reported to the client rather than a bare 500
            return error(500, f"agent failed: {type(exc).__name__}: {exc}", "server_error")
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model_name,
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                for i, text in enumerate(replies)
            ],
        }

    return app


def serve(agent: Any, model_name: str, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
          log_level: str = "info") -> None:
    import uvicorn

    uvicorn.run(create_app(agent, model_name, api_key), host=host, port=port, log_level=log_level)
