"""A remote navigator over MCP (`navigator.mode: mcp`, `navigator.url`): the driver is gated and reviewed by whatever
navigator serves the three tools at that URL (`llm-ide navigator serve`, or another agent)."""

from __future__ import annotations

import asyncio
import os
import ssl
import threading
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from llm_ide.errors import ConfigError
from llm_ide.navigator.protocol import (
    TOKEN_VARIABLE,
    Decision,
    Guidance,
    NavigatorError,
    NavigatorTimeout,
    PermissionRequest,
    Plan,
    Review,
    ReviewRequest,
)

TOOLS = ("request_permission", "request_review", "request_guidance")
HTTP_TIMEOUT = 30.0  # seconds to connect and send; reading an answer waits up to the request's own timeout
T = TypeVar("T")
Result = TypeVar("Result", bound=BaseModel)


class NavigatorUnavailable(NavigatorError):
    """The navigator's server cannot be reached, fails, or answers out of protocol: the run ends, told in one line."""


class McpNavigator:
    """Implements the `Navigator` protocol by calling the tools of an MCP server. Each request opens its own
    connection (a restarted server is simply reached again). A permission must come within `permission_timeout`
    seconds, a review or an answer within `review_timeout`, else `NavigatorTimeout` (the graph's nodes apply
    `navigator.timeout_decision`); a server that cannot be reached or fails raises `NavigatorUnavailable`."""

    def __init__(self, url: str | None, permission_timeout: float = 15.0, review_timeout: float = 300.0) -> None:
        if not url:
            raise ConfigError("navigator.url: missing setting (navigator.mode mcp needs the server's address)")
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"navigator.url: expected http(s)://HOST:PORT/mcp (got {url!r})")
        self.url = url
        self.refused = False  # the last request was refused for its token (401)
        self.permission_timeout = permission_timeout
        self.review_timeout = review_timeout

    def request_permission(self, request: PermissionRequest) -> Decision:
        arguments = request.model_dump(include={"action", "diff", "reason", "thought", "context"})
        return self._ask("request_permission", arguments, Decision, self.permission_timeout)

    def request_review(self, request: ReviewRequest) -> Review:
        return self._ask("request_review", request.model_dump(), Review, self.review_timeout)

    def request_guidance(self, question: str) -> Guidance:
        return self._ask("request_guidance", {"question": question}, Guidance, self.review_timeout)

    def plan(self, task: str) -> Plan:
        """The served navigator's plan when it plans (its `request_plan` tool); else none (an empty plan)."""
        data = self._run(self._plan(task), self.review_timeout)
        return Plan(text="", by="mcp") if data is None else self._result("request_plan", data, Plan)

    def check(self) -> None:
        """The server answers and serves the three tools (before a run starts)."""
        names = self._run(self._list_tools(), self.permission_timeout)
        missing = [tool for tool in TOOLS if tool not in names]
        if missing:
            raise NavigatorUnavailable(f"navigator at {self.url} does not serve {', '.join(missing)}")

    def _ask(self, tool: str, arguments: dict[str, Any], kind: type[Result], timeout: float) -> Result:
        return self._result(tool, self._run(self._call(tool, arguments), timeout), kind)

    def _run(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """`run_in_thread`; a server that refused the request for its token (401) said so in one line."""
        self.refused = False
        try:
            return run_in_thread(coroutine, timeout, self.url)
        except NavigatorUnavailable:
            if self.refused:
                raise NavigatorUnavailable(
                    f"navigator at {self.url} refused the request (401): ${TOKEN_VARIABLE} must hold the token "
                    "`llm-ide navigator serve` printed"
                ) from None
            raise

    def _result(self, tool: str, data: dict[str, Any], kind: type[Result]) -> Result:
        try:
            result = kind.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise NavigatorUnavailable(f"navigator at {self.url}: {tool} answered {where}: {first['msg']}") from None
        return result if result.by == "timeout" else result.model_copy(update={"by": "mcp"})

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[Any]:
        """The SDK's client on a fresh connection; its HTTP client reuses one TLS context (building one per request
        would cost more than the loopback round trips)."""
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        timeout = httpx2.Timeout(HTTP_TIMEOUT, read=max(self.permission_timeout, self.review_timeout))
        token = os.environ.get(TOKEN_VARIABLE, "").strip()
        headers = {"Authorization": f"Bearer {token}"} if token else {}

        async def seen(response: Any) -> None:  # the SDK reports a refusal as an internal error: noted here
            self.refused = self.refused or response.status_code == 401

        hooks = {"response": [seen]}
        async with (
            httpx2.AsyncClient(verify=tls_context(), timeout=timeout, headers=headers, event_hooks=hooks) as http,
            Client(streamable_http_client(self.url, http_client=http)) as client,
        ):
            yield client

    async def _call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        async with self._client() as client:
            await client.list_tools()  # the SDK asks for the answer's schema once it has the answer, unless it has it
            return await self._called(client, tool, arguments)

    async def _plan(self, task: str) -> dict[str, Any] | None:
        async with self._client() as client:
            if "request_plan" not in [tool.name for tool in (await client.list_tools()).tools]:
                return None
            return await self._called(client, "request_plan", {"task": task})

    async def _called(self, client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await client.call_tool(tool, arguments)
        if result.is_error:
            text = " ".join(" ".join(getattr(block, "text", "") for block in result.content).split())
            text = text.removeprefix(f"Error executing tool {tool}: ")
            raise NavigatorUnavailable(f"navigator at {self.url}: {tool} failed: {text or '(no message)'}")
        if result.structured_content is None:
            raise NavigatorUnavailable(f"navigator at {self.url}: {tool} answered without a structured result")
        return result.structured_content

    async def _list_tools(self) -> list[str]:
        async with self._client() as client:
            return [tool.name for tool in (await client.list_tools()).tools]


@cache
def tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()


def run_in_thread(coroutine: Coroutine[Any, Any, T], timeout: float, url: str) -> T:
    """Run `coroutine` on its own event loop in a worker thread (the caller may be inside a loop, e.g. a graph
    node under `langgraph dev`), cancelled after `timeout` seconds."""
    outcome: dict[str, Any] = {}

    async def bounded() -> None:
        try:
            outcome["value"] = await asyncio.wait_for(coroutine, timeout)
        except TimeoutError:
            outcome["error"] = NavigatorTimeout(f"navigator at {url} did not answer within {timeout:g} s")
        except Exception as error:  # ours and transport failures alike may arrive wrapped in exception groups
            cause = root_cause(error)
            unreachable = NavigatorUnavailable(f"navigator at {url} is unreachable: {described(cause)}")
            outcome["error"] = cause if isinstance(cause, NavigatorUnavailable) else unreachable

    worker = threading.Thread(target=asyncio.run, args=(bounded(),), name="mcp-navigator", daemon=True)
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def root_cause(error: BaseException) -> BaseException:
    while True:
        if isinstance(error, BaseExceptionGroup) and error.exceptions:
            error = error.exceptions[0]
        elif error.__cause__ is not None and not isinstance(error, NavigatorUnavailable):
            error = error.__cause__
        else:
            return error


def described(error: BaseException) -> str:
    text = " ".join(str(error).split()) or "(no message)"
    return f"{type(error).__name__}: {text[:300]}"
