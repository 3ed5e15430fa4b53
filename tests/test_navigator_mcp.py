"""The navigator over MCP: real `llm-ide navigator serve` processes on a free loopback port, asked by the MCP SDK's own
client and by the driver's `McpNavigator`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from llm_ide.errors import NavigatorUnavailable
from llm_ide.navigator.mcp_client import McpNavigator
from llm_ide.navigator.protocol import PermissionRequest, ReviewRequest

TESTS = Path(__file__).resolve().parent
CLI = [sys.executable, "-c", "from llm_ide.cli import app; app()"]
READY = "navigator serving at "
TESTS_DIFF = "--- a/tests/test_cart.py\n+++ b/tests/test_cart.py\n@@ -1 +1 @@\n-assert total == 9\n+assert True\n"
CODE_DIFF = "--- a/shop/cart.py\n+++ b/shop/cart.py\n@@ -1 +1 @@\n-RATE = 0.1\n+RATE = 0.2\n"

Serve = Callable[..., str]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """Start `llm-ide navigator serve --port 0 ARGS…`; return its URL once the server says it accepts requests."""
    processes: list[subprocess.Popen[str]] = []

    def start(*args: str, env: dict[str, str] | None = None) -> str:
        log = tmp_path / f"serve-{len(processes)}.log"
        with log.open("w") as stderr:
            process = subprocess.Popen(
                [*CLI, "navigator", "serve", "--port", "0", *args],
                cwd=tmp_path,
                env={**os.environ, "PYTHONPATH": str(TESTS), **(env or {})},
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        processes.append(process)
        for line in process.stdout:
            if line.startswith(READY):
                return line.removeprefix(READY).strip()
        process.wait(timeout=30)
        pytest.fail(f"navigator serve exited {process.returncode} before it was ready: {log.read_text()}")

    yield start
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()


async def sdk_round_trip(url: str) -> dict[str, object]:
    """What any MCP client sees: the tools with their input and output schemas, and the structured answers."""
    from mcp import Client

    async with Client(url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        denied = await client.call_tool(
            "request_permission", {"action": "edit tests/test_cart.py", "diff": TESTS_DIFF, "reason": "make it pass"}
        )
        approved = await client.call_tool(
            "request_permission", {"action": "edit shop/cart.py", "diff": CODE_DIFF, "reason": "the rate is 20%"}
        )
        failed = await client.call_tool("request_review", {"patch": CODE_DIFF + "+print(RATE)\n", "summary": "rate"})
        passed = await client.call_tool("request_review", {"patch": CODE_DIFF, "summary": "rate fixed"})
        guidance = await client.call_tool("request_guidance", {"question": "where is the rate?"})
    return {"tools": tools, "answers": [denied, approved, failed, passed, guidance]}


def test_the_mcp_sdk_client_is_gated_reviewed_and_guided_by_a_served_navigator(serve: Serve) -> None:
    url = serve("--navigator", "remote_navigators:RulesNavigator")
    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
    seen = asyncio.run(sdk_round_trip(url))
    tools = seen["tools"]
    assert sorted(tools) == ["request_guidance", "request_permission", "request_review"]
    assert {"action", "diff", "reason"} <= set(tools["request_permission"].input_schema["properties"])
    assert tools["request_permission"].input_schema["required"] == ["action"]
    assert tools["request_review"].input_schema["required"] == ["patch"]
    assert {"approved", "reason", "usage"} <= set(tools["request_permission"].output_schema["properties"])
    assert {"passed", "comment", "usage"} <= set(tools["request_review"].output_schema["properties"])
    assert not any(answer.is_error for answer in seen["answers"])
    usage = {"calls": 1, "input_tokens": 120, "cached_tokens": 0, "output_tokens": 8, "cost": 0.0021}
    assert [answer.structured_content for answer in seen["answers"]] == [
        {"approved": False, "reason": "leave the tests alone (edit tests/test_cart.py)", "by": "model", "usage": usage},
        {"approved": True, "reason": "fine: the rate is 20%", "by": "model", "usage": usage},
        {"passed": False, "comment": "remove the debug print", "by": "model", "usage": usage},
        {"passed": True, "comment": "looks right: rate fixed", "by": "model", "usage": usage},
        {"answer": "start from the failing test; you asked: where is the rate?", "by": "model", "usage": usage},
    ]


def test_the_driver_side_mcp_navigator_gets_the_decisions_with_their_usage(serve: Serve) -> None:
    navigator = McpNavigator(serve("--navigator", "remote_navigators:RulesNavigator"), timeout=60)
    navigator.check()
    denied = navigator.request_permission(
        PermissionRequest(action="edit tests/test_cart.py", diff=TESTS_DIFF, thought="make it pass", context="…")
    )
    assert (denied.approved, denied.by) == (False, "mcp")
    assert denied.reason == "leave the tests alone (edit tests/test_cart.py)"
    assert (denied.usage.calls, denied.usage.input_tokens, denied.usage.cost) == (1, 120, 0.0021)
    review = navigator.request_review(ReviewRequest(patch=CODE_DIFF, summary="rate"))
    assert (review.passed, review.comment, review.by) == (True, "looks right: rate", "mcp")
    assert navigator.request_guidance("why?").answer == "start from the failing test; you asked: why?"


@pytest.mark.parametrize(("timeout_decision", "approved"), [("deny", False), ("allow", True)])
def test_a_navigator_that_does_not_answer_in_time_gets_the_timeout_decision(
    serve: Serve, tmp_path: Path, timeout_decision: str, approved: bool
) -> None:
    release = tmp_path / "release"
    url = serve("--navigator", "remote_navigators:SlowNavigator", env={"RELEASE_NAVIGATOR": str(release)})
    navigator = McpNavigator(url, timeout=0.5, timeout_decision=timeout_decision)
    decision = navigator.request_permission(PermissionRequest(action="edit shop/cart.py", diff=CODE_DIFF))
    assert (decision.approved, decision.by) == (approved, "timeout")
    assert decision.reason == f"navigator at {url} did not answer within 0.5 s"
    release.touch()
    assert McpNavigator(url, timeout=60).request_review(ReviewRequest(patch=CODE_DIFF)).passed


def test_errors_reach_the_driver_as_one_line(serve: Serve) -> None:
    url = serve("--navigator", "remote_navigators:FailingNavigator")
    with pytest.raises(NavigatorUnavailable) as failed:
        McpNavigator(url).request_review(ReviewRequest(patch=CODE_DIFF))
    assert str(failed.value) == (
        f"navigator at {url}: request_review failed: navigator: model openai:gpt-x failed after 3 attempts: "
        "APIConnectionError: Connection refused"
    )
    down = url.replace("/mcp", "/nothing-here")
    with pytest.raises(NavigatorUnavailable) as missing:
        McpNavigator(down).check()
    assert str(missing.value).startswith(f"navigator at {down} is unreachable: ")
    assert "\n" not in str(missing.value)


def test_a_server_that_is_down_is_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        with pytest.raises(NavigatorUnavailable) as down:
            McpNavigator(url).request_permission(PermissionRequest(action="bash rm -rf build"))
    assert str(down.value).startswith(f"navigator at {url} is unreachable: ConnectError")
    assert "\n" not in str(down.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "--host 0.0.0.0: the navigator serves on loopback only (127.0.0.1, ::1 or localhost)"),
        (["--navigator", "remote_navigators"], "--navigator remote_navigators: expected MODULE:NAME"),
        (["--navigator", "remote_navigators:ONE_CALL"], "--navigator remote_navigators:ONE_CALL: not a navigator"),
    ],
)
def test_bad_serve_options_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    done = subprocess.run(
        [*CLI, "navigator", "serve", "--port", "0", *(["--navigator", "remote_navigators:RulesNavigator"]), *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(TESTS)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {message}") and done.stderr.count("\n") == 1
