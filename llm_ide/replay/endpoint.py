"""A loopback OpenAI-compatible chat endpoint in this process, whose answers come from a function: the replay's (and
the cost benchmark's) model side. Usage is reported in characters / 4, the prefix a request shares with the previous
one of its model as cached tokens."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from llm_ide.inspector.load import content_text

Answer = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


def shared_prefix(previous: list[dict[str, Any]], current: list[dict[str, Any]]) -> int:
    """Characters of `current`'s messages that repeat, as a prefix, the previous request's messages."""
    shared = 0
    for old, new in zip(previous, current, strict=False):
        a, b = content_text(old), content_text(new)
        if old.get("role") != new.get("role"):
            break
        if a != b:
            return shared + len(os.path.commonprefix([a, b]))
        shared += len(a)
    return shared


def prompt_chars(messages: list[dict[str, Any]]) -> int:
    return sum(len(content_text(message)) for message in messages)


def completion(model: str, text: str, index: int, raw: int, cached: int) -> dict[str, Any]:
    """An OpenAI chat completion holding `text`, its usage estimated from characters (raw and cached prompt)."""
    usage = {
        "prompt_tokens": raw // 4,
        "completion_tokens": len(text) // 4,
        "total_tokens": raw // 4 + len(text) // 4,
        "prompt_tokens_details": {"cached_tokens": cached // 4},
    }
    return {
        "id": f"chatcmpl-loopback-{index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop", "logprobs": None}
        ],
        "usage": usage,
    }


def error(status: int, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": "invalid_request_error"}}


class LoopbackEndpoint:
    """`POST .../chat/completions` is answered by `answer(body)` (status, payload); `GET .../models` lists `models`."""

    def __init__(self, answer: Answer, models: list[str]) -> None:
        self.answer = answer
        self.models = models
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> LoopbackEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.send(
                    200, {"object": "list", "data": [{"id": name, "object": "model"} for name in endpoint.models]}
                )

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                self.send(*endpoint.answer(body))

            def send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
