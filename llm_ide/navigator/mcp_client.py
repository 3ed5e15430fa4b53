"""A remote navigator over MCP (`navigator.mode: mcp`, `navigator.url`): the driver is gated and reviewed by whatever
navigator serves the three tools at that URL (`llm-ide navigator serve`, or another agent)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from llm_ide.errors import NavigatorTimeout, NavigatorUnavailable
from llm_ide.navigator.protocol import Decision, Guidance, PermissionRequest, Review, ReviewRequest

TOOLS = ("request_permission", "request_review", "request_guidance")
T = TypeVar("T")
Result = TypeVar("Result", bound=BaseModel)


class McpNavigator:
    """Implements the `Navigator` protocol by calling the tools of an MCP server. Each request opens its own
    connection (a restarted server is simply reached again) and ends within `timeout` seconds: then the permission
    or review follows `timeout_decision` (recorded `by="timeout"`), a guidance question gets no answer. A server
    that cannot be reached or fails raises `NavigatorUnavailable` (one line)."""

    def __init__(
        self, url: str, timeout: float = 60.0, timeout_decision: Literal["deny", "allow"] = "deny", name: str = ""
    ) -> None:
        self.url = url
        self.timeout = timeout
        self.timeout_decision = timeout_decision
        self.name = name or f"mcp:{url}"

    def request_permission(self, request: PermissionRequest) -> Decision:
        arguments = request.model_dump(include={"action", "diff", "reason", "thought", "context"})
        try:
            return self._ask("request_permission", arguments, Decision)
        except NavigatorTimeout as late:
            return Decision(approved=self.timeout_decision == "allow", reason=str(late), by="timeout")

    def request_review(self, request: ReviewRequest) -> Review:
        try:
            return self._ask("request_review", request.model_dump(), Review)
        except NavigatorTimeout as late:
            return Review(passed=self.timeout_decision == "allow", comment=str(late), by="timeout")

    def request_guidance(self, question: str) -> Guidance:
        try:
            return self._ask("request_guidance", {"question": question}, Guidance)
        except NavigatorTimeout as late:
            return Guidance(answer=f"(no answer: {late})", by="timeout")

    def check(self) -> None:
        """The server answers and serves the three tools (before a run starts)."""
        names = run_in_thread(self._list_tools(), self.timeout, self.url)
        missing = [tool for tool in TOOLS if tool not in names]
        if missing:
            raise NavigatorUnavailable(f"navigator at {self.url} does not serve {', '.join(missing)}")

    def _ask(self, tool: str, arguments: dict[str, Any], kind: type[Result]) -> Result:
        data = run_in_thread(self._call(tool, arguments), self.timeout, self.url)
        try:
            result = kind.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise NavigatorUnavailable(f"navigator at {self.url}: {tool} answered {where}: {first['msg']}") from None
        return result if result.by == "timeout" else result.model_copy(update={"by": "mcp"})

    async def _call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        from mcp import Client

        async with Client(self.url) as client:
            result = await client.call_tool(tool, arguments)
        if result.is_error:
            text = " ".join(" ".join(getattr(block, "text", "") for block in result.content).split())
            text = text.removeprefix(f"Error executing tool {tool}: ")
            raise NavigatorUnavailable(f"navigator at {self.url}: {tool} failed: {text or '(no message)'}")
        if result.structured_content is None:
            raise NavigatorUnavailable(f"navigator at {self.url}: {tool} answered without a structured result")
        return result.structured_content

    async def _list_tools(self) -> list[str]:
        from mcp import Client

        async with Client(self.url) as client:
            return [tool.name for tool in (await client.list_tools()).tools]


def run_in_thread(coroutine: Coroutine[Any, Any, T], timeout: float, url: str) -> T:
    """Run `coroutine` on its own event loop in a worker thread (the caller may be inside a loop, e.g. a graph
    node under `langgraph dev`), cancelled after `timeout` seconds."""
    outcome: dict[str, Any] = {}

    async def bounded() -> None:
        try:
            outcome["value"] = await asyncio.wait_for(coroutine, timeout)
        except TimeoutError:
            outcome["error"] = NavigatorTimeout(f"navigator at {url} did not answer within {timeout:g} s")
        except NavigatorUnavailable as error:
            outcome["error"] = error
        except Exception as error:  # transport failures arrive wrapped in exception groups
            outcome["error"] = NavigatorUnavailable(f"navigator at {url} is unreachable: {root_cause(error)}")

    worker = threading.Thread(target=asyncio.run, args=(bounded(),), name="mcp-navigator", daemon=True)
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def root_cause(error: BaseException) -> str:
    while True:
        if isinstance(error, BaseExceptionGroup) and error.exceptions:
            error = error.exceptions[0]
        elif error.__cause__ is not None:
            error = error.__cause__
        else:
            break
    text = " ".join(str(error).split()) or "(no message)"
    return f"{type(error).__name__}: {text[:300]}"
