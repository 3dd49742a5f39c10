"""An OpenAI chat-completions request body, checked field by field (docs/agent-programs.md).

Every refusal is an `OpenAIError`: the HTTP status and OpenAI's error shape
(``{"error": {"message", "type", "param", "code"}}``), `param` naming the field as OpenAI does
(``messages[2].tool_calls[0].function.arguments``). What the endpoint cannot do is refused by
name, never ignored: a request that asks for it would get something else than it asked.
Fields OpenAI clients send that change nothing here (``user``, ``metadata``, ``store``,
``parallel_tool_calls``, ``service_tier``, ...) are accepted and ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from py_trainer.agents.spec import TOOL_NAME, schema_problem

ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_N = 16
"""Choices per request (`n`): each is a sequence of the batch."""
MAX_STOP = 4
"""Stop sequences per request, OpenAI's own bound."""


class OpenAIError(Exception):
    """A refusal in OpenAI's error shape."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def bad(param: str | None, message: str, code: str | None = None) -> OpenAIError:
    where = f"{param}: " if param else ""
    return OpenAIError(400, where + message, param, code)


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict


@dataclass
class Message:
    role: str
    """"system" (a "developer" message is one), "user", "assistant" or "tool\""""
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str = ""


@dataclass
class ChatRequest:
    model: str
    messages: list[Message]
    tools: list[dict]
    """each tool's function dict (name, description, parameters), in the order given"""
    tool_choice: str | None
    """"auto", "none", "required", or a tool's name (the call is forced to that tool)"""
    temperature: float | None
    top_p: float | None
    max_tokens: int | None
    n: int
    seed: int | None
    stop: list[str]
    stream: bool
    include_usage: bool
    logprobs: bool


def number(body: dict, name: str, lo: float, hi: float, *, integer: bool = False, low_open: bool = False):
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise bad(name, f"must be {'an integer' if integer else 'a number'}, got {json.dumps(value)[:40]}")
    if value < lo or value > hi or (low_open and value == lo):
        raise bad(name, f"must be in {'(' if low_open else '['}{lo:g}, {hi:g}], got {value:g}")
    return value


def text_content(value, where: str, *, allow_none: bool) -> str:
    """A message's content: a string, or a list of text parts (joined), or null where allowed."""
    if value is None:
        if allow_none:
            return ""
        raise bad(where, "must be a string or a list of text parts")
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        out = []
        for j, part in enumerate(value):
            if not isinstance(part, dict):
                raise bad(f"{where}[{j}]", "must be an object")
            if part.get("type") != "text":
                raise bad(f"{where}[{j}].type", f"only \"text\" parts are supported, got {json.dumps(part.get('type'))}")
            if not isinstance(part.get("text"), str):
                raise bad(f"{where}[{j}].text", "must be a string")
            out.append(part["text"])
        return "".join(out)
    raise bad(where, "must be a string or a list of text parts")


def tool_calls_of(value, where: str) -> list[ToolCall]:
    if not isinstance(value, list):
        raise bad(where, "must be a list")
    out = []
    for j, call in enumerate(value):
        at = f"{where}[{j}]"
        if not isinstance(call, dict):
            raise bad(at, "must be an object")
        if call.get("type", "function") != "function":
            raise bad(f"{at}.type", f"must be \"function\", got {json.dumps(call.get('type'))}")
        fn = call.get("function")
        if not isinstance(fn, dict):
            raise bad(f"{at}.function", "must be an object with name and arguments")
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise bad(f"{at}.function.name", "must be a non-empty string")
        args = fn.get("arguments", "{}")
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError as err:
                raise bad(f"{at}.function.arguments", f"is not JSON ({err.msg} at column {err.colno})") from None
        if not isinstance(args, dict):
            raise bad(f"{at}.function.arguments", "must be a JSON object")
        out.append(ToolCall(id=str(call.get("id") or f"call_{j}"), name=fn["name"], arguments=args))
    return out


def message_of(m, i: int) -> Message:
    where = f"messages[{i}]"
    if not isinstance(m, dict):
        raise bad(where, "must be an object")
    role = m.get("role")
    if role not in ROLES:
        raise bad(f"{where}.role", f"must be one of {', '.join(ROLES)}, got {json.dumps(role)}")
    if role == "assistant":
        calls = tool_calls_of(m["tool_calls"], f"{where}.tool_calls") if m.get("tool_calls") else []
        content = text_content(m.get("content"), f"{where}.content", allow_none=bool(calls) or "content" not in m)
        return Message("assistant", content, tool_calls=calls)
    content = text_content(m.get("content"), f"{where}.content", allow_none=False)
    if role == "tool":
        if not isinstance(m.get("tool_call_id"), str):
            raise bad(f"{where}.tool_call_id", "must be a string (the id of the call this answers)")
        return Message("tool", content, tool_call_id=m["tool_call_id"])
    return Message("system" if role == "developer" else role, content)


def tools_of(value) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad("tools", "must be a list of function tools")
    out, names = [], set()
    for i, t in enumerate(value):
        where = f"tools[{i}]"
        if not isinstance(t, dict):
            raise bad(where, "must be an object")
        if t.get("type") != "function":
            raise bad(f"{where}.type", f"only \"function\" tools are supported, got {json.dumps(t.get('type'))}")
        fn = t.get("function")
        if not isinstance(fn, dict):
            raise bad(f"{where}.function", "must be an object with a name")
        name = fn.get("name")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise bad(f"{where}.function.name", f"must match {TOOL_NAME.pattern}, got {json.dumps(name)}")
        if name in names:
            raise bad(f"{where}.function.name", f"{name!r} is named twice")
        names.add(name)
        if "description" in fn and not isinstance(fn["description"], str):
            raise bad(f"{where}.function.description", "must be a string")
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict):
            raise bad(f"{where}.function.parameters", "must be a JSON-schema object")
        problem = schema_problem(json.dumps(params))
        if problem:
            raise bad(f"{where}.function.parameters", problem)
        tool = {"name": name}
        if fn.get("description"):
            tool["description"] = fn["description"]
        tool["parameters"] = params
        out.append(tool)
    return out


def tool_choice_of(value, tools: list[dict]) -> str | None:
    if value is None:
        return None
    if value in ("auto", "none", "required"):
        if value == "required" and not tools:
            raise bad("tool_choice", "\"required\" needs tools")
        return value
    if isinstance(value, dict) and value.get("type") == "function" and isinstance(value.get("function"), dict):
        name = value["function"].get("name")
        if name not in {t["name"] for t in tools}:
            raise bad("tool_choice.function.name", f"{json.dumps(name)} is not one of the request's tools")
        return name
    raise bad("tool_choice", "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\"}}")


def stop_of(value) -> list[str]:
    if value is None:
        return []
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise bad("stop", "must be a non-empty string or a list of them")
    if len(stops) > MAX_STOP:
        raise bad("stop", f"at most {MAX_STOP} sequences, got {len(stops)}")
    return stops


UNSUPPORTED = {
    "logit_bias": "a bias on token ids",
    "audio": "audio output",
    "prediction": "predicted outputs",
    "functions": "the deprecated `functions` (send `tools`)",
    "function_call": "the deprecated `function_call` (send `tool_choice`)",
    "web_search_options": "web search",
}


def parse_chat_request(raw: bytes) -> ChatRequest:
    """The request body, checked; every refusal names its field."""
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise bad(None, f"the body is not JSON ({err})") from None
    if not isinstance(body, dict):
        raise bad(None, "the body must be a JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise bad("model", "must be a non-empty string (GET /v1/models lists the names)")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise bad("messages", "must be a non-empty list")
    for name, what in UNSUPPORTED.items():
        if body.get(name):
            raise bad(name, f"{what} is not supported by this endpoint")
    for name in ("presence_penalty", "frequency_penalty"):
        if number(body, name, -2, 2):
            raise bad(name, "only 0 is supported (the policy samples as it was trained)")
    fmt = body.get("response_format")
    if fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        raise bad("response_format", "only {\"type\": \"text\"} is supported")
    if body.get("top_logprobs"):
        raise bad("top_logprobs", "only the chosen token's logprob is returned (`logprobs: true`)")
    messages = [message_of(m, i) for i, m in enumerate(msgs)]
    tools = tools_of(body.get("tools"))
    max_tokens = number(body, "max_completion_tokens", 1, 1 << 20, integer=True)
    if max_tokens is None:
        max_tokens = number(body, "max_tokens", 1, 1 << 20, integer=True)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad("stream", "must be true or false")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise bad("stream_options", "must be an object")
    logprobs = body.get("logprobs", False)
    if not isinstance(logprobs, bool):
        raise bad("logprobs", "must be true or false")
    n = number(body, "n", 1, MAX_N, integer=True) or 1
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise bad("seed", "must be an integer")
    return ChatRequest(model=body["model"], messages=messages, tools=tools,
                       tool_choice=tool_choice_of(body.get("tool_choice"), tools),
                       temperature=number(body, "temperature", 0, 2), top_p=number(body, "top_p", 0, 1, low_open=True),
                       max_tokens=max_tokens, n=n, seed=seed, stop=stop_of(body.get("stop")), stream=stream,
                       include_usage=bool(options.get("include_usage")), logprobs=logprobs)
