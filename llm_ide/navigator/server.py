"""The navigator as an MCP server (official `mcp` SDK, streamable HTTP on loopback): any MCP-capable coding agent asks
it for permission, a review or guidance, and gets the navigator's structured decision back with its usage."""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import anyio.to_thread
from pydantic import BaseModel

from llm_ide.errors import LlmIdeError, UsageError
from llm_ide.navigator.protocol import (
    Decision,
    Guidance,
    Navigator,
    PermissionRequest,
    Plan,
    Review,
    ReviewRequest,
)
from llm_ide.secrets import redact

MCP_PATH = "/mcp"
LOOPBACK_NAMES = {"localhost"}


class Answers:
    """The navigator's answers, one request at a time, in their order; each request, its answer (or error) and the
    navigator's own model calls appended to `log` (JSON lines) when there is one. A request whose client gave up while
    it waited for its turn is not run (the SDK cancels it): the navigator spends nothing on an answer nobody reads. One
    whose client gives up while it is answered sets the navigator's `abandoned` event, if it has one (the model
    navigator: no further model call, a reply streaming in cut); the next request waits for its end all the same."""

    def __init__(self, navigator: Navigator, log: Path | None) -> None:
        self.navigator, self.log, self.turn = navigator, log, anyio.Lock()
        self.abandoned: threading.Event | None = getattr(navigator, "abandoned", None)

    async def __call__(self, tool: str, arguments: dict[str, Any], call: Callable[[], BaseModel]) -> Any:
        async with self.turn:
            answered = threading.Event()
            async with anyio.create_task_group() as watching:
                if self.abandoned is not None:
                    self.abandoned.clear()
                    watching.start_soon(self.watch, answered, self.abandoned)
                with anyio.CancelScope(shield=True):  # the navigator answers one request at a time: its end is awaited
                    result, error = await anyio.to_thread.run_sync(self.settled, tool, arguments, call)
                answered.set()
                watching.cancel_scope.cancel()
            if error is not None:
                raise error  # out of the task group, which would wrap it in a group the SDK does not read
            return result

    @staticmethod
    async def watch(answered: threading.Event, abandoned: threading.Event) -> None:
        """Until the request is answered: its client leaving (the request cancelled) tells the navigator."""
        try:
            await anyio.sleep_forever()
        finally:
            if not answered.is_set():
                abandoned.set()

    def settled(
        self, tool: str, arguments: dict[str, Any], call: Callable[[], BaseModel]
    ) -> tuple[Any, Exception | None]:
        try:
            return self.answer(tool, arguments, call), None
        except Exception as error:
            return None, error

    def answer(self, tool: str, arguments: dict[str, Any], call: Callable[[], BaseModel]) -> Any:
        from mcp.server.mcpserver.exceptions import ToolError

        entry: dict[str, Any] = {"time": time.time(), "tool": tool, "arguments": arguments}
        try:
            result = call()
        except LlmIdeError as error:
            entry["error"] = str(error)
            raise ToolError(str(error) if str(error).startswith("navigator") else f"navigator: {error}") from None
        else:
            entry["result"] = result.model_dump(mode="json")
            return result
        finally:
            drain = getattr(self.navigator, "drain", None)  # a long-lived server keeps no unbounded call list
            entry["calls"] = drain() if drain is not None else []
            if self.log is not None:
                with self.log.open("a", encoding="utf-8") as file:
                    file.write(redact(json.dumps(entry)) + "\n")  # a request may quote a secret or the token


def build_server(ask: Answers) -> Any:
    """An `MCPServer` whose tools call `ask.navigator`, one request at a time (a navigator keeps its own context)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(
        "llm-ide-navigator",
        instructions="A navigator beside a coding agent: ask permission before writes, a review of the patch before "
        "submitting, guidance when stuck. Every answer is structured (approved/reason, passed/comment, answer) with "
        "the navigator's usage.",
        log_level="WARNING",
    )
    navigator = ask.navigator

    @server.tool()
    async def request_permission(
        action: str, diff: str = "", reason: str = "", thought: str = "", context: str = ""
    ) -> Decision:
        """Ask before running `action` (the tool call as written). `diff`: the change it makes (edit/create);
        `reason`: why the agent wants it; `thought` and `context`: the agent's reasoning and the code it looked at.
        Approved or denied, with the navigator's reason."""
        request = PermissionRequest(action=action, diff=diff, reason=reason, thought=thought, context=context)
        return await ask("request_permission", request.model_dump(), lambda: navigator.request_permission(request))

    @server.tool()
    async def request_review(patch: str, summary: str = "") -> Review:
        """Ask for a review of `patch` (a unified diff of the work so far), described by `summary`. Passed or failed,
        with the navigator's comment."""
        request = ReviewRequest(patch=patch, summary=summary)
        return await ask("request_review", request.model_dump(), lambda: navigator.request_review(request))

    @server.tool()
    async def request_guidance(question: str) -> Guidance:
        """Ask the navigator a question about the task or the code; the answer comes back."""
        return await ask("request_guidance", {"question": question}, lambda: navigator.request_guidance(question))

    if hasattr(navigator, "plan"):  # a planner (the model navigator): a fourth tool

        @server.tool()
        async def request_plan(task: str) -> Plan:
            """Before the agent's first step: the navigator explores the repository read-only and writes a plan for
            `task`; later reviews may update it (their `plan`)."""
            return await ask("request_plan", {"task": task}, lambda: navigator.plan(task))

    return server


def bearer_only(app: Any, token: str) -> Any:
    """`app` (ASGI) answering only HTTP requests that carry `Authorization: Bearer <token>`; any other gets 401 with a
    `WWW-Authenticate: Bearer` challenge, as the MCP authorization spec has a protected server answer (the token is a
    shared secret given out of band, not an OAuth one: there is no authorization server to discover)."""
    expected = token.encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
            scheme, _, credential = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(credential.strip(), expected):
                error = "invalid_token" if given else "invalid_request"
                challenge = f'Bearer realm="llm-ide-navigator", error="{error}"'.encode()
                headers = [(b"www-authenticate", challenge), (b"content-type", b"application/json")]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": json.dumps({"error": error}).encode()})
                return
        await app(scope, receive, send)

    return guarded


def check_loopback(host: str) -> None:
    """The server listens on loopback only."""
    if host in LOOPBACK_NAMES:
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise UsageError(f"--host {host}: the navigator serves on loopback only (127.0.0.1, ::1 or localhost)")


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the server starts (port 0: a free port, told in the announced URL)."""
    check_loopback(host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    sock.listen(128)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}{MCP_PATH}" if ":" in host else f"http://{host}:{port}{MCP_PATH}"


def loopback_only(sock: socket.socket) -> Any:
    """Host and Origin headers must name this loopback server: a web page cannot reach it by DNS rebinding."""
    from mcp.server.transport_security import TransportSecuritySettings

    host = sock.getsockname()[0]
    names = ["127.0.0.1", "localhost", "[::1]", f"[{host}]" if ":" in host else host]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in dict.fromkeys(names)],
        allowed_origins=[f"http://{name}:*" for name in dict.fromkeys(names)],
    )


def serve(
    navigator: Navigator,
    sock: socket.socket,
    on_ready: Callable[[str], None],
    log: Path | None = None,
    token: str | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM; `on_ready(url)` once the server accepts requests; with `token`, only to requests
    that carry it (a bearer token)."""
    import uvicorn

    ask = Answers(navigator, log)
    app = build_server(ask).streamable_http_app(transport_security=loopback_only(sock))
    app = app if token is None else bearer_only(app, token)
    url = url_of(sock)

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                on_ready(url)

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            stopping = self.should_exit
            super().handle_exit(sig, frame)
            if self.force_exit:  # a second Ctrl-C: the requests cut short are no errors to print a traceback of
                logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
            elif not stopping and ask.turn.locked():
                hint = " (Ctrl-C again: at once)" if sig == signal.SIGINT else ""
                print(f"navigator: stopping once the request under way is answered{hint}", file=sys.stderr, flush=True)

    Server(uvicorn.Config(app, log_level="warning", lifespan="on")).run(sockets=[sock])
