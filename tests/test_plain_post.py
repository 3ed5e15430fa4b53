"""The chat completions asked whole go over http.client (llm_ide.plain_post) with what the run's httpx client would
send, on a raw loopback server that records the bytes: the same request line, headers and body; replies decoded as
httpx decodes them; kept connections reused, and one the server closed since never used; each read under the
request's deadline. (tests/test_direct_completions.py checks the same requests against the SDK's, and the errors.)"""

from __future__ import annotations

import gzip
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_ide.endpoint import http_client, request_deadline
from llm_ide.plain_post import PlainPost, body_bytes, wire_json

BODY = {"model": "m", "messages": [{"role": "user", "content": 'ünïcode \u2028 </tag> "quoted"'}], "n": 1.5}
REPLY = json.dumps({"choices": [{"message": {"role": "assistant", "content": "done"}}]}).encode()


class RawServer:
    """Answers each request on a connection with `reply` (status, headers, body); `close` closes the connection
    after each answer (without saying so), `stall` sends the headers then nothing. Records each request's bytes."""

    def __init__(self, body: bytes = REPLY, headers: tuple[tuple[str, str], ...] = (), close: bool = False) -> None:
        self.body, self.headers, self.close = body, headers, close
        self.stall = False
        self.closed = threading.Semaphore(0)  # released as each connection is closed
        self.requests: list[bytes] = []
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1/chat/completions"
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def answer(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            self.exchange(conn, reader)
        self.closed.release()

    def exchange(self, conn: socket.socket, reader: Any) -> None:
        while head := self.read_head(reader):
            length = int(next(v for k, v in head if k.lower() == "content-length"))
            self.requests.append(b"".join(f"{k}: {v}\r\n".encode() for k, v in head) + reader.read(length))
            extra = "".join(f"{k}: {v}\r\n" for k, v in self.headers)
            conn.sendall(f"HTTP/1.1 200 OK\r\n{extra}Content-Length: {len(self.body)}\r\n\r\n".encode())
            if self.stall:
                time.sleep(5)
                return
            conn.sendall(self.body)
            if self.close:
                return

    @staticmethod
    def read_head(reader: Any) -> list[tuple[str, str]]:
        line = reader.readline()
        if not line.startswith(b"POST "):
            return []
        head = [("request", line.decode().strip())]
        while (line := reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            head.append((name, value.strip()))
        return head


@contextmanager
def serving(**options: Any) -> Iterator[RawServer]:
    server = RawServer(**options)
    try:
        yield server
    finally:
        server.listener.close()


def post_both(server: RawServer) -> tuple[bytes, bytes, Any]:
    """The same body POSTed by httpx (the run's client) and by PlainPost: both requests' bytes and PlainPost's reply."""
    client = http_client(10)
    headers = {"Authorization": "Bearer k", "User-Agent": "OpenAI/Python 1.0", "X-Stainless-Lang": "python"}
    client.post(server.url, json=BODY, headers=headers, params={"api-version": "1"}).read()
    plain = PlainPost(client, server.url, headers, {"api-version": "1"}, 10)
    kept = b",".join(wire_json(message).encode("utf-8") for message in BODY["messages"])  # as Completions keeps them
    reply = plain.post(body_bytes(BODY, {"messages": b"[" + kept + b"]"}))
    return server.requests[0], server.requests[1], reply


def test_the_request_is_the_one_httpx_sends_byte_for_byte(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="httpx")
    with serving() as server:
        by_httpx, plain, (status, _, data) = post_both(server)
    assert plain == by_httpx
    said = [record.getMessage() for record in caplog.records if record.name == "httpx"]
    assert said == [said[0]] * 2 and said[0].endswith('/v1/chat/completions?api-version=1 "HTTP/1.1 200 OK"')
    assert plain.startswith(b"request: POST /v1/chat/completions?api-version=1 HTTP/1.1\r\n")
    assert b'"content":"\xc3\xbcn\xc3\xafcode \xe2\x80\xa8 </tag> \\"quoted\\""' in plain
    assert (status, data) == (200, REPLY)


@pytest.mark.parametrize("encoding", ["gzip", "identity"])
def test_a_compressed_reply_is_decoded_as_httpx_decodes_it(encoding: str) -> None:
    body = gzip.compress(REPLY) if encoding == "gzip" else REPLY
    with serving(body=body, headers=(("Content-Encoding", encoding),)) as server:
        _, _, (status, headers, data) = post_both(server)
    assert (status, data) == (200, REPLY)
    assert ("Content-Encoding", encoding) in headers


@pytest.mark.parametrize(("close", "connections"), [(False, 1), (True, 3)])
def test_a_kept_connection_is_reused_unless_the_server_closed_it(close: bool, connections: int) -> None:
    with serving(close=close) as server:
        plain = PlainPost(http_client(10), server.url, {}, {}, 10)
        replies = []
        for _ in range(3):
            replies.append(plain.post(body_bytes(BODY, {}))[2])
            assert server.closed.acquire(timeout=10 if close else 0) is close  # closed (or kept) before the next
        assert server.connections == connections
    assert replies == [REPLY] * 3
    assert len(server.requests) == 3


def test_a_stalled_reply_ends_at_the_requests_deadline_not_the_read_timeout() -> None:
    with serving() as server:
        server.stall = True
        plain = PlainPost(http_client(30), server.url, {}, {}, 30)
        with pytest.raises((TimeoutError, httpcore.TimeoutException)), request_deadline(time.monotonic() + 0.5):
            plain.post(
                body_bytes(BODY, {})
            )  # without the deadline: the 30 s read timeout, cut short by the server's close at 5 s


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)
@given(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=5), st.lists(JSON_VALUES, max_size=4))
def test_a_body_written_in_parts_is_the_body_written_whole(body: dict[str, Any], messages: list[Any]) -> None:
    """The messages' JSON made apart (each once, kept by chat_wire.Completions) and joined: the same bytes."""
    whole = {**body, "messages": messages}
    parts = {"messages": b"[" + b",".join(wire_json(message).encode("utf-8") for message in messages) + b"]"}
    assert body_bytes(whole, parts) == body_bytes(whole, {}) == wire_json(whole).encode("utf-8")
    assert body_bytes(whole, {}) == json.dumps(whole, ensure_ascii=False, separators=(",", ":")).encode()
