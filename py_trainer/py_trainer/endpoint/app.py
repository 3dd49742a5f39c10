"""The OpenAI-compatible endpoint: a Starlette app served by uvicorn in a thread of the process that
holds the model (docs/agent-programs.md).

Routes:
- ``GET /v1/models``, ``POST /v1/chat/completions``: the named policies (`agent serve-policy`,
  `py-trainer serve-policy`), for any OpenAI client; the token, when one is set, as a bearer key;
- ``GET /rollouts/<id>/v1/models``, ``POST /rollouts/<id>/v1/chat/completions``: one rollout of an
  agent program, recorded token for token (`rollouts`); the rollout book's key is required; an
  unknown or finished rollout is a 404 in OpenAI's shape.
Every refusal is OpenAI's error shape with its HTTP status; a failure inside generation is a 500 in
the same shape, never a stack trace on the wire. Loopback unless the caller binds elsewhere.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import socket
import threading
import time
import uuid

from py_trainer.endpoint.chat import OpenAIError, parse_chat_request
from py_trainer.endpoint.policy import Policy
from py_trainer.endpoint.rollouts import RolloutBook

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 << 20
THREADS = 256
"""Requests served at once (each waits on the generator while its batch runs)."""


def error_response(err: OpenAIError):
    from starlette.responses import JSONResponse

    return JSONResponse(err.body(), status_code=err.status)


def authorized(request, key: str | None) -> bool:
    if not key:
        return True
    got = request.headers.get("authorization", "")
    return hmac.compare_digest(got.encode(), f"Bearer {key}".encode())


def build_app(policies: dict[str, Policy], book: RolloutBook | None, token: str | None,
              rollout_policy=None):
    """The ASGI app. `rollout_policy()` gives the policy rollouts generate with (the model being
    trained, at its current step), read at each call."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    def models_body(names: list[str]) -> dict:
        return {"object": "list", "data": [{"id": n, "object": "model", "created": 0, "owned_by": "py-trainer"}
                                           for n in names]}

    def rollout_of(request):
        rid = request.path_params["rollout_id"]
        if book is None:
            raise OpenAIError(404, "this endpoint serves no rollouts", code="rollout_not_found")
        if not authorized(request, book.api_key):
            raise OpenAIError(401, "the rollout's api key is missing or wrong", code="invalid_api_key")
        rollout = book.get(rid)
        if rollout is None:
            raise OpenAIError(404, f"no rollout {rid!r}: unknown, or it ended", code="rollout_not_found")
        return rollout

    async def body_of(request) -> bytes:
        size = int(request.headers.get("content-length") or 0)
        if size > MAX_BODY_BYTES:
            raise OpenAIError(413, f"the body is {size} bytes, over {MAX_BODY_BYTES}")
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            raise OpenAIError(413, f"the body is over {MAX_BODY_BYTES} bytes")
        return raw

    async def reply(request, policy: Policy, rollout):
        req = parse_chat_request(await body_of(request))
        try:
            out = await run_in_threadpool(policy.complete, req, rollout)
        except OpenAIError:
            raise
        except Exception as err:  # a failure inside generation: 500 in OpenAI's shape, logged with its trace
            log.exception("chat completion failed")
            raise OpenAIError(500, f"generation failed: {type(err).__name__}: {err}", kind="server_error") from None
        if not req.stream:
            return JSONResponse(out)
        return StreamingResponse(sse(out, req.include_usage), media_type="text/event-stream")

    async def plain_models(request):
        if not authorized(request, token):
            raise OpenAIError(401, "the bearer token is missing or wrong", code="invalid_api_key")
        return JSONResponse(models_body(list(policies)))

    async def plain_chat(request):
        if not authorized(request, token):
            raise OpenAIError(401, "the bearer token is missing or wrong", code="invalid_api_key")
        raw = await body_of(request)
        try:
            name = json.loads(raw).get("model")
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            name = None
        if isinstance(name, str) and name and name not in policies:
            raise OpenAIError(404, f"the model {name!r} does not exist here; the models are: {', '.join(policies)}",
                              param="model", code="model_not_found")
        return await reply(request, policies.get(name) if isinstance(name, str) else None, None)

    async def rollout_models(request):
        rollout_of(request)
        return JSONResponse(models_body(["policy"]))

    async def rollout_chat(request):
        rollout = rollout_of(request)
        return await reply(request, rollout_policy(), rollout)

    async def on_openai_error(request, err: OpenAIError):
        return error_response(err)

    async def on_http_error(request, err: HTTPException):
        return JSONResponse({"error": {"message": f"{request.method} {request.url.path}: {err.detail}",
                                       "type": "invalid_request_error", "param": None, "code": None}},
                            status_code=err.status_code)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        import anyio.to_thread

        anyio.to_thread.current_default_thread_limiter().total_tokens = THREADS
        yield

    routes = [Route("/v1/models", plain_models, methods=["GET"]),
              Route("/v1/chat/completions", plain_chat, methods=["POST"]),
              Route("/rollouts/{rollout_id}/v1/models", rollout_models, methods=["GET"]),
              Route("/rollouts/{rollout_id}/v1/chat/completions", rollout_chat, methods=["POST"])]
    return Starlette(routes=routes, lifespan=lifespan,
                     exception_handlers={OpenAIError: on_openai_error, HTTPException: on_http_error})


def sse(out: dict, include_usage: bool):
    """A finished chat.completion as OpenAI's chat.completion.chunk events (the reply is generated
    whole, then sent: one content delta, one delta per tool call, the finish, usage when asked)."""
    base = {"id": out["id"], "object": "chat.completion.chunk", "created": out["created"], "model": out["model"]}

    def event(choices, **extra) -> str:
        return "data: " + json.dumps({**base, "choices": choices, **extra}, ensure_ascii=False) + "\n\n"

    for c in out["choices"]:
        i, msg = c["index"], c["message"]
        yield event([{"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        if msg.get("content"):
            yield event([{"index": i, "delta": {"content": msg["content"]}, "finish_reason": None,
                          "logprobs": c["logprobs"]}])
        for k, call in enumerate(msg.get("tool_calls", [])):
            yield event([{"index": i, "delta": {"tool_calls": [{"index": k, **call}]}, "finish_reason": None}])
        yield event([{"index": i, "delta": {}, "finish_reason": c["finish_reason"]}])
    if include_usage:
        yield event([], usage=out["usage"])
    yield "data: [DONE]\n\n"


class EndpointServer:
    """The app served by uvicorn on a thread; `url` once started. Port 0 = any free port."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0):
        import uvicorn

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.host, self.port = host, self.sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                                    timeout_graceful_shutdown=1))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name=f"endpoint-{uuid.uuid4().hex[:6]}", daemon=True)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> "EndpointServer":
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the OpenAI-compatible endpoint did not start on {self.url}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
