"""A scriptable OpenAI-compatible chat-completions server on 127.0.0.1, for tests.

    with OpenAIServer(replies=["first answer", 429, "second answer"]) as server:
        model = get_model("my-model", config, base_url=server.url)

Each POST to `.../chat/completions` takes the next reply; once the list is used up the last reply repeats
(so `[500]` is "500 forever" and `["garbage"]` is garbage forever). A reply is
- a str: an assistant message with that text and usage (estimated as chars // 4 unless given by `Reply`);
- an int: that HTTP status with an OpenAI-style error body (404 says the model does not exist);
- "hang": no answer until the client gives up or the server closes;
- "invalid_json": status 200, content-type application/json, a body that is not JSON;
- a `Reply` for anything else (several choices for a request with `n`, exact usage, a custom error message, a text
  that is literally "hang"), or to misbehave
  on purpose: `body` sent verbatim (bytes, or JSON-encoded) instead of a completion, `headers` added (Retry-After),
  `drip` seconds between the bytes of the whole response (a slow-drip server).
A request with `"stream": true` gets its reply as server-sent events, one chunk per word (and the usage last when
`stream_options.include_usage` asks for it, unless `stream_usage=False`: a server that never sends it); with
`Reply(gate=PATH)` only the first word is sent until PATH exists (not streamed: nothing is).
`Reply(finish_reason="length")` is a reply cut at the length limit, `Reply(delay=S)` one that starts after S seconds;
`Reply(cut=N)` streams N chunks, then its server dies (the connection closed, the chunked body unfinished);
`Reply(pace=S)` streams a chunk every S seconds (a model writing at 1/S tokens per second), `Reply(pings=S)` streams
nothing but an SSE comment every S seconds (a server alive that produces nothing); `server.streamed` says how many
chunks of how many each streamed reply got out (fewer: the client left).
GET `/v1/models` lists `models` (`None`: 404); any other path is 404, as a real server's. `server.requests` records
every request (path, headers, parsed body) in arrival order. POST `/v1/messages` answers the same replies in
Anthropic's Messages API shape.
`Reply(tool_calls=(("view", {"path": "a.py"}),))` calls tools after its text: OpenAI's `tool_calls` (arguments given
as a str are sent as they are, JSON or not; streamed as deltas), Anthropic's `tool_use` blocks.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from openai_replies import (
    HANG,
    INVALID_JSON,
    Reply,
    anthropic_body,
    as_reply,
    completion_body,
    error_body,
    finish,
    stream_calls,
)

__all__ = ["HANG", "INVALID_JSON", "CtrlCAtPiece", "OpenAIServer", "RecordedRequest", "Reply"]  # what the tests import


class CtrlCAtPiece:
    """A model call's listener (`on_model_call`) that stops the call as Ctrl-C does once the reply's `piece`-th piece
    of text is in: a stream the user cut mid-reply."""

    def __init__(self, piece: int = 3) -> None:
        self.piece, self.pieces = piece, 0

    def __call__(self, progress: Any) -> None:  # (a CallProgress)
        self.pieces += progress.kind == "text"
        if self.pieces == self.piece and progress.kind == "text":
            raise KeyboardInterrupt


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class OpenAIServer:
    replies: list[str | int | Reply]
    host: str = "127.0.0.1"
    port: int = 0
    hang_seconds: float = 60.0
    requests: list[RecordedRequest] = field(default_factory=list)
    dripped: list[int] = field(default_factory=list)  # bytes each dripping response got out before the client left
    streamed: list[tuple[int, int]] = field(default_factory=list)  # each streamed reply: (chunks sent, of)
    together: int = 0  # the first `together` requests are answered only once all of them have arrived (else a 500)
    latency: float = 0.0  # seconds before each answer (benchmarks: a remote endpoint's round trip)
    models: list[str] | None = field(default_factory=list)  # GET /v1/models lists these; None: no such route (404)
    stream_usage: bool = True  # False: a streamed reply never carries usage, whatever the request asks (llama.cpp)
    streams: bool = True  # False: a request for a stream is answered with one JSON body (a server that cannot stream)
    props: dict[str, Any] | None = None  # GET /props answers these (llama.cpp's server: its chat template's abilities)

    def __post_init__(self) -> None:
        if not self.replies:
            raise ValueError("OpenAIServer needs at least one reply")
        self._replies = [as_reply(item) for item in self.replies]
        self._lock = threading.Lock()
        self._together = threading.Barrier(self.together) if self.together > 1 else None
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def hits(self) -> int:
        return len(self.requests)

    def start(self) -> OpenAIServer:
        self._httpd = ThreadingHTTPServer((self.host, self.port), _handler_class(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="openai-test-server", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _next(self, request: RecordedRequest) -> tuple[int, Reply]:
        with self._lock:
            index = len(self.requests)
            self.requests.append(request)
            return index, self._replies[min(index, len(self._replies) - 1)]


def _handler_class(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            route = self.path.partition("?")[0].rstrip("/")  # (a query is the endpoint's, e.g. `?api-key=…`)
            if route == "/v1/models" and server.models is not None:
                listed = [{"id": name, "object": "model", "owned_by": "test"} for name in server.models]
                self._send_json(200, {"object": "list", "data": listed})
            elif route == "/props" and server.props is not None:
                self._send_json(200, server.props)
            else:
                self._send_json(404, error_body(404, "", f"no route {self.path}"))

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", 0)))
            anthropic = self.path.rstrip("/") == "/v1/messages"
            if not anthropic and self.path.partition("?")[0].rstrip("/") != "/v1/chat/completions":
                self._send_json(404, error_body(404, "", f"no route {self.path}"))
                return
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                body = raw.decode("utf-8", "replace")
            recorded = RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            index, reply = server._next(recorded)
            request = body if isinstance(body, dict) else {}
            if server.latency or reply.delay:
                server._closing.wait(server.latency + reply.delay)
            while reply.gate and not request.get("stream") and not Path(reply.gate).exists():
                if server._closing.wait(0.02):
                    return
            if server._together is not None and index < server.together:
                try:
                    server._together.wait(timeout=server.hang_seconds)
                except threading.BrokenBarrierError:
                    reply = Reply(status=500, error_message="the requests did not arrive together")
            if reply.hang:
                server._closing.wait(server.hang_seconds)
                self.close_connection = True
            elif reply.body is not None:
                data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                self._send_raw(reply.status, data, "application/json", reply)
            elif reply.invalid_json:
                self._send_raw(200, b'{"id": "chatcmpl-broken", "choices": [{"message": ', "application/json")
            elif reply.status != 200:
                body = error_body(reply.status, request.get("model", ""), reply.error_message)
                self._send_json(reply.status, body, reply)
            elif anthropic:
                self._send_json(200, anthropic_body(reply, request, index), reply)
            elif request.get("stream") and server.streams:
                self._stream(reply, request, index)
            else:
                self._send_json(200, completion_body(reply, request, index), reply)

        def _send_json(self, status: int, payload: dict[str, Any], reply: Reply | None = None) -> None:
            self._send_raw(status, json.dumps(payload).encode(), "application/json", reply)

        def _send_raw(self, status: int, data: bytes, content_type: str, reply: Reply | None = None) -> None:
            headers = [
                ("content-type", content_type),
                ("content-length", str(len(data))),
                *(reply.headers if reply else ()),
            ]
            if reply is not None and reply.drip:
                self._drip(status, headers, data, reply.drip)
                return
            try:
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _stream(self, reply: Reply, request: dict[str, Any], index: int) -> None:
            """The completion as server-sent events, a chunk per word; the connection's end ends the body."""
            body = completion_body(reply, request, index)
            base = {key: body[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
            pieces = re.findall(r"\s*\S+\s*", reply.text or "") or [""]
            events = [{"role": "assistant", "content": pieces[0]}, *({"content": piece} for piece in pieces[1:])]
            events += stream_calls(reply, index)
            chunks = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in events]
            chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish(reply)}]})
            asked = (request.get("stream_options") or {}).get("include_usage")
            if asked and server.stream_usage and "usage" in body:
                chunks.append({**base, "choices": [], "usage": body["usage"]})
            self.close_connection = True
            sent = 0
            chunked = reply.cut is not None  # as real servers send a stream: its end is a chunk of its own

            def send(data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                self.wfile.flush()

            try:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                if chunked:
                    self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                while reply.pings and not server._closing.wait(reply.pings):
                    send(b": ping\n\n")
                for number, chunk in enumerate([*chunks, "[DONE]"]):
                    if number == reply.cut:
                        return  # the server dies: the connection closes with the body unfinished
                    while number == 1 and reply.gate and not Path(reply.gate).exists():
                        if server._closing.wait(0.02):
                            return
                    if number and reply.pace and server._closing.wait(reply.pace):
                        return
                    data = chunk if isinstance(chunk, str) else json.dumps(chunk)
                    send(f"data: {data}\n\n".encode())
                    sent += 1
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                server.streamed.append((sent, len(chunks) + 1))

        def _drip(self, status: int, headers: list[tuple[str, str]], data: bytes, seconds: float) -> None:
            lines = [f"HTTP/1.1 {status} OK", *(f"{name}: {value}" for name, value in headers)]
            raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + data
            sent = 0
            try:
                for byte in raw:
                    if server._closing.wait(seconds):
                        break
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    sent += 1
            except (BrokenPipeError, ConnectionResetError):
                pass
            server.dripped.append(sent)
            self.close_connection = True

    return Handler


def main() -> None:
    """`python tests/openai_server.py REPLIES.yaml [PORT [MODEL …]]`: serve a YAML list of replies until interrupted;
    GET /v1/models lists the MODELs."""
    import sys

    import yaml

    replies = yaml.safe_load(Path(sys.argv[1]).read_text())
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    with OpenAIServer(replies=replies, port=port, models=sys.argv[3:]) as server:
        print(server.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
