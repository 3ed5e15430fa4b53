"""The served navigator's clients: the MCP SDK's own client gated, reviewed and guided by a served model navigator, a
driver run planned, gated and reviewed over MCP, a navigator that does not answer in time, and what goes wrong told
in one line (a server down before the run, bad `navigator serve` options)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_script import (
    BUGGY_FILES,
    TEST_COMMAND,
    act,
    reflect,
    single_call,
    write_script,
)
from agent_script import (
    CART_FIX as FIX,
)
from agent_script import (
    CART_SUBMIT as SUBMIT,
)
from agent_script import (
    CART_TESTS as TESTS,
)
from agent_script import (
    CART_VIEW as VIEW,
)
from conftest import git, make_git_repo
from in_process import invoke
from navigator_mcp_support import CODE_DIFF, TESTS_DIFF, TOKEN_VARIABLE, launch, stop

from llm_ide.config import load_config
from llm_ide.navigator.mcp_client import McpNavigator, NavigatorUnavailable
from llm_ide.navigator.protocol import (
    NavigatorTimeout,
    PermissionRequest,
    ReviewRequest,
)
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory

FIX_DIFF = (
    "--- a/shop/cart.py\n+++ b/shop/cart.py\n@@ -13,3 +13,3 @@\n         for name, price, quantity in self.items:\n"
    "-            total += price\n+            total += price * quantity\n         return round(total, 2)\n"
)
KEYS = {"approved", "passed", "reason", "comment", "answer", "by"}
CHEAT = act(
    "Expect what the code returns[1](tests/test_cart.py:11).", "edit", path="tests/test_cart.py", old="16.0", new="11.5"
)

Serve = Callable[..., str]


@pytest.fixture
def serve(tmp_path: Path, token: str) -> Iterator[Serve]:
    """Start `llm-ide navigator serve --port 0 ARGS…` (with the `token`); return its URL once the server says it
    accepts requests."""
    processes: list[subprocess.Popen[str]] = []

    def start(*args: str, env: dict[str, str] | None = None) -> str:
        process, url, _ = launch(tmp_path, list(args), {**os.environ, **(env or {})})
        processes.append(process)
        return url

    yield start
    stopped = [stop(process) for process in processes]
    assert stopped == [128 + signal.SIGTERM] * len(processes)  # a graceful stop on SIGTERM, the navigator closed


async def sdk_round_trip(url: str) -> dict[str, Any]:
    """What any MCP client sees: the tools with their input and output schemas, and the structured answers."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {os.environ[TOKEN_VARIABLE]}"}  # what any MCP client is configured with
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        calls = [
            (
                "request_permission",
                {
                    "action": "edit tests/test_cart.py",
                    "diff": TESTS_DIFF,
                    "reason": f"make it pass, {os.environ[TOKEN_VARIABLE]}",
                },
            ),  # a secret quoted
            ("request_permission", {"action": "edit shop/cart.py", "diff": FIX_DIFF, "reason": "count quantities"}),
            ("request_review", {"patch": FIX_DIFF.replace("price * quantity", "price * 1"), "summary": "first try"}),
            ("request_review", {"patch": FIX_DIFF, "summary": "quantities counted"}),
            ("request_guidance", {"question": "Where is the total computed?"}),
        ]
        answers = [await client.call_tool(name, arguments) for name, arguments in calls]
    return {"tools": tools, "answers": answers}


def test_the_mcp_sdk_client_is_gated_reviewed_and_guided_by_a_served_model_navigator(
    serve: Serve, tmp_path: Path
) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    script = [
        '<view>{"path": "tests/test_cart.py"}</view>',  # it explores the repository read-only before deciding
        "<deny>The test states the intended total: fix Cart.total instead.</deny>",
        "<approve>Multiplying by the quantity is the fix.</approve>",
        f'<bash>{{"command": "{TEST_COMMAND}"}}</bash>',  # a reviewer may run the tests
        "<fail>Quantities are still ignored: price * 1.</fail>",
        "<pass>Cart.total multiplies by the quantity.</pass>",
        "<answer>In Cart.total, shop/cart.py line 14.</answer>",
    ]
    model = write_script(tmp_path / "navigator.yaml", script)
    log = tmp_path / "served.jsonl"
    url = serve("--model", model, "--repo", str(repo), "--task", "Cart.total ignores quantities.", "--log", str(log))
    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")

    seen = asyncio.run(sdk_round_trip(url))
    logged = log.read_text()
    assert os.environ[TOKEN_VARIABLE] not in logged and '"reason": "make it pass, ***"' in logged  # masked, as said

    tools = seen["tools"]
    assert sorted(tools) == ["request_guidance", "request_permission", "request_plan", "request_review"]
    assert {"action", "diff", "reason"} <= set(tools["request_permission"].input_schema["properties"])
    assert tools["request_permission"].input_schema["required"] == ["action"]
    assert tools["request_review"].input_schema["required"] == ["patch"]
    assert {"approved", "reason", "usage"} <= set(tools["request_permission"].output_schema["properties"])
    assert {"passed", "comment", "usage"} <= set(tools["request_review"].output_schema["properties"])
    assert not any(answer.is_error for answer in seen["answers"])
    results = [answer.structured_content for answer in seen["answers"]]
    assert [{k: v for k, v in result.items() if k in KEYS} for result in results] == [
        {"approved": False, "reason": "The test states the intended total: fix Cart.total instead.", "by": "model"},
        {"approved": True, "reason": "Multiplying by the quantity is the fix.", "by": "model"},
        {"passed": False, "comment": "Quantities are still ignored: price * 1.", "by": "model"},
        {"passed": True, "comment": "Cart.total multiplies by the quantity.", "by": "model"},
        {"answer": "In Cart.total, shop/cart.py line 14.", "by": "model"},
    ]
    assert [result["usage"]["api_calls"] for result in results] == [2, 1, 2, 1, 1]  # exploring costs calls too
    assert all(result["usage"]["input_tokens"] > 0 for result in results)
    assert git(repo, "status", "--porcelain") == ""  # read-only: the served navigator changed nothing


def test_a_driver_run_is_planned_gated_and_reviewed_by_a_served_navigator(serve: Serve, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    navigator = [
        '<view>{"path": "shop/cart.py"}</view>',
        "<plan>1. In Cart.total multiply price by quantity.\n2. Run the unit tests.</plan>",
        "<deny>Changing the test hides the bug: fix Cart.total instead.</deny>",
        "<approve>This multiplies by the quantity, as planned.</approve>",
        "<approve>Running the tests is fine.</approve>",
        "<pass>The loop counts quantities and the tests pass.</pass>",
    ]
    log = tmp_path / "served.jsonl"
    url = serve("--model", write_script(tmp_path / "navigator.yaml", navigator), "--repo", str(repo), "--log", str(log))
    driver = [VIEW, reflect(False, "total sums price only."), CHEAT, FIX, reflect(False, "fixed"), TESTS]
    driver += [reflect(False, "tests pass"), SUBMIT]
    config = tmp_path / "served.yaml"  # `llm-ide run` end to end: the server is checked, then the run is gated by it
    config.write_text(json.dumps({"environment": {"tools": []}, "navigator": {"url": url, "review_on_submit": True}}))
    done = invoke(
        *["run", "--repo", str(repo), "--task", "Cart.total ignores quantities.", "--config", str(config)],
        *["--model", write_script(tmp_path / "driver.yaml", driver), "--output", str(tmp_path / "out")],
        *["--thread-id", "served", "--navigator", "mcp"],
        cwd=tmp_path,
    )
    traj = load_trajectory(tmp_path / "out" / "served.traj.json")

    assert done.returncode == 0, done.stderr
    assert traj["info"]["exit_status"] == "submitted"
    patch = (tmp_path / "out" / "served.patch").read_text()
    assert "+            total += price * quantity" in patch and "test_cart" not in patch
    operations = [(o["id"], o["parent_id"], o["action_type"], o["bad_action"]) for o in traj["operations"]]
    assert operations[:3] == [(0, None, "view", False), (1, 0, "edit", True), (2, 0, "edit", False)]  # a sibling
    reason = "Changing the test hides the bug: fix Cart.total instead."
    assert traj["operations"][1]["denied"] == {"reason": reason, "by": "mcp"}
    assert traj["operations"][-1]["review"] == {
        "round": 1,
        "passed": True,
        "by": "mcp",
        "comment": "The loop counts quantities and the tests pass.",
    }
    assert "# Plan (from the navigator)\n1. In Cart.total multiply" in traj["model_calls"][0]["prompt"]
    record = traj["info"]["navigator"]
    assert [(d["approved"], d["by"]) for d in record["decisions"]] == [(False, "mcp"), (True, "mcp"), (True, "mcp")]
    assert record["usage"]["api_calls"] == len(navigator)  # the server's model calls, apart from the driver's
    assert traj["info"]["model_stats"]["api_calls"] == len(single_call(driver)) == 5  # one call per step

    served = [json.loads(line) for line in log.read_text().splitlines()]  # the server's own record
    assert [entry["tool"] for entry in served] == ["request_plan", *["request_permission"] * 3, "request_review"]
    cheat = served[1]["arguments"]
    assert cheat["thought"] == "Expect what the code returns[1](tests/test_cart.py:11)."
    assert "-        self.assertEqual(cart.total(), 16.0)" in cheat["diff"]
    assert "def total(self)" in cheat["context"]  # the driver's code context went along
    assert served[1]["result"]["approved"] is False and served[4]["result"]["passed"] is True
    assert [len(entry["calls"]) for entry in served] == [2, 1, 1, 1, 1]  # the navigator's model calls, each logged


def test_a_served_navigator_that_does_not_answer_in_time_gets_the_timeout_decision(
    serve: Serve, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    url = serve("--navigator", "remote_navigators:SlowNavigator", env={"RELEASE_NAVIGATOR": str(release)})
    with pytest.raises(NavigatorTimeout) as late:
        McpNavigator(url, permission_timeout=0.5).request_permission(PermissionRequest(action="edit shop/cart.py"))
    assert str(late.value) == f"navigator at {url} did not answer within 0.5 s"

    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    navigator = {"mode": "mcp", "url": url, "permission_timeout": 0.5, "timeout_decision": "allow"}
    result = run_task(
        "Cart.total ignores quantities.",
        model=write_script(
            tmp_path / "driver.yaml", [VIEW, reflect(False, "price only"), FIX, reflect(False, "ok"), SUBMIT]
        ),
        settings=load_config("default", environment={"tools": []}, navigator=navigator),
        output_dir=tmp_path / "out",
        run_id="late",
        repo=repo,
    )
    release.touch()
    (decision,) = load_trajectory(result.trajectory_path)["info"]["navigator"]["decisions"]
    assert (result.exit_status, decision["approved"], decision["by"]) == ("submitted", True, "timeout")
    assert f"navigator at {url} did not answer within 0.5 s" in decision["reason"]
    assert "+            total += price * quantity" in result.submission


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


@pytest.mark.parametrize(
    ("navigator", "message"),
    [
        ({"mode": "mcp", "url": "URL"}, "error: navigator at URL is unreachable: ConnectError: "),
        (
            {"mode": "mcp"},
            "error: navigator.url: missing setting (navigator.mode mcp needs the server's address)",
        ),
        ({"mode": "model", "model": "scripted:/nonexistent.yaml"}, "error: navigator.model: scripted model: file not"),
        ({"mode": "model", "model": "opneai:gpt"}, "error: navigator.model: model opneai:gpt: unknown provider"),
        ({"mode": "model", "prompts": "/nonexistent.yaml"}, "error: navigator.prompts /nonexistent.yaml: cannot be"),
        ({"mode": "human"}, "error: navigator.mode human asks on this terminal, and stdin is not one: run it on a"),
    ],  # a navigator model's problems were told after the environment started; no terminal: a 15 s 'timeout'
)
def test_llm_ide_run_tells_a_navigator_server_that_is_down_in_one_line_before_it_starts(
    tmp_path: Path, navigator: dict[str, str], message: str
) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    with socket.socket() as sock:  # a port nobody listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        config = tmp_path / "navigator.yaml"
        config.write_text(json.dumps({"navigator": {k: v.replace("URL", url) for k, v in navigator.items()}}))
        model = write_script(tmp_path / "driver.yaml", [VIEW])
        done = invoke(
            "run", "--repo", str(repo), "--task", "t", "--model", model, "--config", str(config), cwd=tmp_path
        )
    assert done.returncode == 2
    assert done.stderr.startswith(message.replace("URL", url)) and done.stderr.count("\n") == 1
    assert not (tmp_path / "runs").exists()  # nothing ran


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "--host 0.0.0.0: the navigator serves on loopback only (127.0.0.1, ::1 or localhost)"),
        (["--navigator", "remote_navigators"], "--navigator remote_navigators: expected MODULE:NAME"),
        (["--navigator", "remote_navigators:ONE_CALL"], "--navigator remote_navigators:ONE_CALL: not a navigator"),
        (["--port", "99999"], "Invalid value for '--port': 99999 is not in the range 0<=x<=65535."),  # a traceback
        (["--log", "missing/serve.log"], "--log missing/serve.log: no such directory: missing"),
        (["--log", "."], "--log .: a directory, not a file"),  # was a traceback at the first request
    ],
)
def test_bad_serve_options_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    served = ["--navigator", "remote_navigators:RulesNavigator"]  # tests/ is on the path of the test's process
    done = invoke("navigator", "serve", "--port", "0", *served, *args, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {message}") and done.stderr.count("\n") == 1
