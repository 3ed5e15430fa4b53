"""A chat completion asked whole, POSTed over http.client: the request the run's httpx client (endpoint.http_client)
would send — its URL, its headers, its JSON body byte for byte, its TLS settings; it takes no proxy — at half the CPU
(httpx's layers cost about 0.8 ms a request on loopback). Each socket operation ends by the request's deadline
(`endpoint.request_deadline`); a kept connection the server has closed since is dropped before it is used again."""

from __future__ import annotations

import http.client
import io
import json
import logging
import select
import socket
import ssl
import threading
from typing import Any

import httpx

from llm_ide.endpoint import EndpointClient, polled, remaining

Headers = list[tuple[str, str]]
log = logging.getLogger("httpx")  # each request said as httpx says it, where it says it: its readers still see them


def wire_json(value: Any) -> str:
    """`value` as JSON the way httpx writes a request's body: compact, not ASCII-escaped, no NaN."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def body_bytes(body: dict[str, Any], parts: dict[str, bytes]) -> bytes:
    """`wire_json(body)` in UTF-8, that of the fields in `parts` as given (the same bytes: json writes an object as
    its members' JSON joined by the separators alone)."""
    if not all(type(key) is str for key in body):
        return wire_json(body).encode("utf-8")
    members = (
        (wire_json(key) + ":").encode("utf-8") + (parts[key] if key in parts else wire_json(value).encode("utf-8"))
        for key, value in body.items()
    )
    return b"{" + b",".join(members) + b"}"


class DeadlineReader(io.RawIOBase):
    """A socket's reads, each given what is left of the request's deadline (at most the read timeout)."""

    def __init__(self, sock: socket.socket, timeout: float | None) -> None:
        self.sock, self.timeout = sock, timeout

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return polled(lambda seconds: self.receive(buffer, seconds), self.timeout, TimeoutError)

    def receive(self, buffer: Any, seconds: float | None) -> int:
        self.sock.settimeout(seconds)
        return self.sock.recv_into(buffer)


class DeadlineSocket:
    """What http.client asks of its socket (send, a file to read the response from, close), under the deadline."""

    def __init__(self, sock: socket.socket, timeouts: httpx.Timeout) -> None:
        self.sock, self.timeouts = sock, timeouts

    def sendall(self, data: bytes) -> None:
        self.sock.settimeout(remaining(self.timeouts.write))
        self.sock.sendall(data)

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(DeadlineReader(self.sock, self.timeouts.read))

    def close(self) -> None:
        self.sock.close()

    def closed_by_peer(self) -> bool:
        """Whether the idle connection is readable: the server closed it (or broke the protocol)."""
        return bool(select.select([self.sock], [], [], 0)[0])


class Connection(http.client.HTTPConnection):
    def __init__(self, url: httpx.URL, context: ssl.SSLContext | None, timeouts: httpx.Timeout) -> None:
        super().__init__(url.host, url.port or (443 if context else 80))
        self.context, self.timeouts = context, timeouts

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), remaining(self.timeouts.connect))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.context is not None:
            sock.settimeout(remaining(self.timeouts.connect))
            sock = self.context.wrap_socket(sock, server_hostname=self.host)
        self.sock = DeadlineSocket(sock, self.timeouts)


class PlainPost:
    """POSTs JSON bodies to one URL with the headers httpx would send them with (made once, by httpx itself)."""

    def __init__(
        self, client: EndpointClient, url: str, headers: dict[str, str], query: dict[str, Any], timeout: Any
    ) -> None:
        template = client.build_request("POST", url, headers=headers, params=query, json={})
        self.url = template.url
        self.target = template.url.raw_path.decode("ascii")
        self.headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in template.headers.raw]  # httpx's own
        self.timeouts = httpx.Timeout(timeout)
        self.context = client.ssl_context if self.url.scheme == "https" else None
        self.idle: list[Connection] = []
        self.lock = threading.Lock()

    def request(self) -> httpx.Request:
        """The request as httpx would have made it (what the SDK's errors hold; its length aside)."""
        return httpx.Request("POST", self.url, headers=self.headers)

    def post(self, content: bytes) -> tuple[int, Headers, bytes]:
        """The status, headers and body (decoded as httpx would: gzip, deflate...) of the reply to `content` (a
        body's JSON: `body_bytes`)."""
        connection = self._connection()
        try:
            connection.putrequest("POST", self.target, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers:
                connection.putheader(name, str(len(content)) if name.lower() == "content-length" else value)
            connection.endheaders(content)
            response = connection.getresponse()
            status, headers, data = response.status, response.getheaders(), response.read()
        except BaseException:
            connection.close()
            raise
        log.info('HTTP Request: POST %s "HTTP/1.1 %d %s"', self.url, status, response.reason)
        if response.will_close:
            connection.close()
        else:
            with self.lock:
                self.idle.append(connection)
        if any(name.lower() == "content-encoding" and value.lower() != "identity" for name, value in headers):
            data = httpx.Response(status, headers=headers, content=data).content
        return status, headers, data

    def _connection(self) -> Connection:
        while True:
            with self.lock:
                connection = self.idle.pop() if self.idle else None
            if connection is None:
                return Connection(self.url, self.context, self.timeouts)
            sock = connection.sock
            if isinstance(sock, DeadlineSocket) and not sock.closed_by_peer():
                return connection
            connection.close()


def answers_http(tls: ssl.SSLSocket) -> bool:
    """Whether a connection whose TLS hello got no answer in time answers plain HTTP once the hello is ended as an HTTP
    request's head: a plain HTTP server that waits for a head to end (llama.cpp's) took it for one; a TLS server slow
    to handshake never answers so (though an HTTPS port of nginx answers a plain request of its own, with a 400). The
    connection is closed."""
    timeout = tls.gettimeout()
    with socket.socket(fileno=tls.detach()) as connection:
        try:
            connection.settimeout(timeout)
            connection.sendall(b"\r\n\r\n")
            return connection.recv(5) == b"HTTP/"
        except OSError:
            return False
