"""What the test server (tests/openai_server.py) answers: a `Reply` (or the str or int it stands for) as OpenAI's chat
completion, its tool calls as streamed deltas, Anthropic's message, or an OpenAI-style error body."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

HANG = "hang"
INVALID_JSON = "invalid_json"


@dataclass(frozen=True)
class Reply:
    text: str | None = None
    status: int = 200
    hang: bool = False
    invalid_json: bool = False
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None  # of input_tokens: read from the prompt cache (OpenAI: prompt_tokens_details)
    cache_write_tokens: int | None = None  # of input_tokens: written to the prompt cache (Anthropic only)
    usage: bool = True
    error_message: str | None = None
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()
    drip: float = 0.0
    choices: tuple[str, ...] = ()  # several choices (a request with `n`): these texts instead of `text`
    gate: str | None = None  # the reply (streamed: all but its first word) waits until this file exists
    finish_reason: str = "stop"  # "length": cut at the request's max_tokens (Anthropic: stop_reason max_tokens)
    delay: float = 0.0  # seconds before this reply starts (a local model on CPU reading a long prompt)
    pace: float = 0.0  # streamed: seconds between two chunks
    pings: float = 0.0  # streamed: only ": ping" comments, this many seconds apart, until the client leaves
    tool_calls: tuple[tuple[str, Any], ...] = ()  # (tool name, arguments: a mapping, or a str sent as it is)
    cut: int | None = None  # streamed: the server dies after this many chunks (its chunked body left unfinished)


def as_reply(item: str | int | Reply) -> Reply:
    if isinstance(item, Reply):
        return item
    if isinstance(item, bool) or not isinstance(item, str | int):
        raise TypeError(f"a reply is a str, an int status or a Reply, not {item!r}")
    if isinstance(item, int):
        return Reply(status=item)
    if item == HANG:
        return Reply(hang=True)
    if item == INVALID_JSON:
        return Reply(invalid_json=True)
    return Reply(text=item)


ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_exceeded", "rate_limit_exceeded"),
}


def error_body(status: int, model: str, message: str | None) -> dict[str, Any]:
    default = f"The model `{model}` does not exist or you do not have access to it." if status == 404 else None
    kind, code = ERROR_TYPES.get(status, ("server_error", None))
    text = message or default or f"test server error {status}"
    return {"error": {"message": text, "type": kind, "param": None, "code": code}}


def arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def openai_calls(reply: Reply, index: int) -> list[dict[str, Any]]:
    return [
        {"id": f"call_{index}_{position}", "type": "function", "function": {"name": name, "arguments": arguments(args)}}
        for position, (name, args) in enumerate(reply.tool_calls)
    ]


def finish(reply: Reply) -> str:
    return "tool_calls" if reply.tool_calls and reply.finish_reason == "stop" else reply.finish_reason


def completion_body(reply: Reply, request: dict[str, Any], index: int) -> dict[str, Any]:
    text = reply.text or ""
    prompt_chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
    message: dict[str, Any] = {"role": "assistant", "refusal": None}
    message |= {"tool_calls": openai_calls(reply, index)} if reply.tool_calls else {}
    body: dict[str, Any] = {
        "id": f"chatcmpl-test-{index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "unknown"),
        "choices": [
            {
                "index": position,
                "message": {**message, "content": choice or (None if reply.tool_calls else choice)},
                "finish_reason": finish(reply),
                "logprobs": None,
            }
            for position, choice in enumerate(reply.choices or (text,))
        ],
    }
    if reply.usage:
        prompt = reply.input_tokens if reply.input_tokens is not None else prompt_chars // 4
        written = sum(len(choice) for choice in reply.choices or (text,))
        completion = reply.output_tokens if reply.output_tokens is not None else written // 4
        body["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        if reply.cached_tokens is not None:
            body["usage"]["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
    return body


def anthropic_body(reply: Reply, request: dict[str, Any], index: int) -> dict[str, Any]:
    """The same reply in Anthropic's Messages API shape (POST `/v1/messages`, for `ChatAnthropic(base_url=...)`)."""
    text = reply.text or ""
    calls = [
        {"type": "tool_use", "id": f"toolu_{index}_{position}", "name": name, "input": args}
        for position, (name, args) in enumerate(reply.tool_calls)
    ]
    return {
        "id": f"msg_test_{index}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "unknown"),
        "content": [*([{"type": "text", "text": text}] if text or not calls else []), *calls],
        "stop_reason": "max_tokens" if reply.finish_reason == "length" else "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": (reply.input_tokens or 100) - (reply.cached_tokens or 0) - (reply.cache_write_tokens or 0),
            "cache_read_input_tokens": reply.cached_tokens or 0,
            "cache_creation_input_tokens": reply.cache_write_tokens or 0,
            "output_tokens": reply.output_tokens or len(text) // 4,
        },
    }


def stream_calls(reply: Reply, index: int) -> list[dict[str, Any]]:
    """The tool calls as streamed deltas: each call's id and name, then its arguments in pieces."""
    deltas: list[dict[str, Any]] = []
    for position, call in enumerate(openai_calls(reply, index)):
        head = {**call, "function": {"name": call["function"]["name"], "arguments": ""}}
        deltas.append({"tool_calls": [{"index": position, **head}]})
        text = call["function"]["arguments"]
        for start in range(0, len(text), 16):
            deltas.append({"tool_calls": [{"index": position, "function": {"arguments": text[start : start + 16]}}]})
    return deltas
