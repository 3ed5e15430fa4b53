"""A loopback OpenAI-compatible chat endpoint in this process, whose answers come from a function: the replay's (and
the cost benchmark's) model side. Usage is reported in characters / 4, the prefix a request shares with the previous
one of its model as cached tokens. A request's text is its messages' (an assistant's tool calls: their name and
arguments) with its tools, as sent, after the system message: the prompt a provider reads."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from llm_ide import chat_wire
from llm_ide.inspector.load import content_text

Answer = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]
log = logging.getLogger("llm_ide.replay")


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A request that failed is a line of the log, not a traceback on stderr; one whose client left (Ctrl-C while
        it waited for its answer) says nothing."""
        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError | KeyboardInterrupt):
            log.warning("the loopback endpoint could not answer a request: %s: %s", type(error).__name__, error)


def shared_prefix(previous: list[dict[str, Any]], current: list[dict[str, Any]]) -> int:
    """Characters of `current`'s messages that repeat, as a prefix, the previous request's messages."""
    return chat_wire.shared_prefix(previous, current, content_text)


def prompt_chars(messages: list[dict[str, Any]]) -> int:
    return sum(len(content_text(message)) for message in messages)


def wire_messages(body: dict[str, Any]) -> list[dict[str, str]]:
    """A request's messages as text (an assistant's tool calls after its content, each its name and arguments), its
    tools (their JSON) after the system message."""
    messages = []
    for message in body.get("messages") or []:
        calls = [call.get("function") or {} for call in message.get("tool_calls") or []]
        named = "".join(f"\n{call.get('name', '')} {call.get('arguments', '')}" for call in calls)
        messages.append({"role": str(message.get("role")), "content": content_text(message) + named})
    if body.get("tools"):
        at = 1 if messages and messages[0]["role"] == "system" else 0
        messages.insert(at, {"role": "tools", "content": json.dumps(body["tools"], ensure_ascii=False)})
    return messages


def completion(
    model: str, text: str, index: int, raw: int, cached: int, call: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An OpenAI chat completion holding `text` (and the tool `call`: its name and arguments), its usage estimated
    from characters (raw and cached prompt, the text and the call's name and arguments)."""
    written = len(text) + (len(call["name"]) + len(call["arguments"]) if call else 0)
    usage = {
        "prompt_tokens": raw // 4,
        "completion_tokens": written // 4,
        "total_tokens": raw // 4 + written // 4,
        "prompt_tokens_details": {"cached_tokens": cached // 4},
    }
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if call:
        message["tool_calls"] = [{"id": f"call_loopback_{index}", "type": "function", "function": call}]
    return {
        "id": f"chatcmpl-loopback-{index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop", "logprobs": None}
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
        self.httpd = Server(("127.0.0.1", 0), self.handler())
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
