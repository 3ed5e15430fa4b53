"""The navigator over MCP: real `llm-ide navigator serve` processes on a free loopback port, asked by the MCP SDK's own
client and by the driver's `McpNavigator`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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
from conftest import git, isolated_environ, make_git_repo, wait_for
from in_process import invoke
from openai_server import OpenAIServer, Reply
from pydantic import BaseModel

from llm_ide.config import load_config
from llm_ide.navigator.mcp_client import McpNavigator, NavigatorUnavailable
from llm_ide.navigator.protocol import (
    NavigatorError,
    NavigatorTimeout,
    NavigatorUsage,
    PermissionRequest,
    Plan,
    ReviewRequest,
)
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory

TESTS_DIR = Path(__file__).resolve().parent
CLI = [sys.executable, "-c", "from llm_ide.cli import app; app()"]
READY = "navigator serving at "
TOKEN_VARIABLE = "LLM_IDE_NAVIGATOR_TOKEN"  # where servers and clients find the token (documented)
TESTS_DIFF = "--- a/tests/test_cart.py\n+++ b/tests/test_cart.py\n@@ -1 +1 @@\n-assert total == 9\n+assert True\n"
CODE_DIFF = "--- a/shop/cart.py\n+++ b/shop/cart.py\n@@ -1 +1 @@\n-RATE = 0.1\n+RATE = 0.2\n"
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
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    """The served navigators' bearer token, in the variable both the servers and the clients read."""
    value = f"test-{uuid.uuid4().hex}"
    monkeypatch.setenv(TOKEN_VARIABLE, value)
    return value


def launch(tmp_path: Path, args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str, list[str]]:
    """`llm-ide navigator serve --port 0 ARGS…` with `env`: the process, its URL once it accepts requests, and the
    lines it printed before."""
    log = tmp_path / f"serve-{uuid.uuid4().hex[:8]}.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [*CLI, "navigator", "serve", "--port", "0", *args],
            cwd=tmp_path,
            env={**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS_DIR), env.get("PYTHONPATH")]))},
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    printed = []
    for line in process.stdout:
        if line.startswith(READY):
            return process, line.removeprefix(READY).strip(), printed
        printed.append(line)
    process.wait(timeout=30)
    pytest.fail(f"navigator serve exited {process.returncode} before it was ready: {log.read_text()}")


def stop(process: subprocess.Popen[str]) -> int:
    process.terminate()
    try:
        return process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()
    finally:
        process.stdout.close()


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


@pytest.fixture(scope="session")
def rules_server(tmp_path_factory: pytest.TempPathFactory, session_cache: Path) -> Iterator[tuple[str, str]]:
    """One RulesNavigator server for the tests that only ask it (it keeps nothing between requests; each test has its
    own clients): its URL and token. Its environment is a test's (conftest.isolated_environ); stopped and checked as
    `serve` stops its servers. Kept for the session: xdist hands a worker tests of other modules in between, and a
    module's fixture was started again after each (~2.5 s of CPU a start)."""
    token = f"test-{uuid.uuid4().hex}"
    env = isolated_environ(tmp_path_factory, session_cache) | {TOKEN_VARIABLE: token}
    folder = tmp_path_factory.mktemp("rules-server")
    process, url, _ = launch(folder, ["--navigator", "remote_navigators:RulesNavigator"], env)
    yield url, token
    assert stop(process) == 128 + signal.SIGTERM


@pytest.fixture
def rules(rules_server: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> str:
    """The shared RulesNavigator server's URL, its token in the variable the clients read."""
    url, token = rules_server
    monkeypatch.setenv(TOKEN_VARIABLE, token)
    return url


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


def test_the_driver_side_mcp_navigator_gets_the_decisions_with_their_usage(rules: str) -> None:
    navigator = McpNavigator(rules)
    navigator.check()
    denied = navigator.request_permission(
        PermissionRequest(action="edit tests/test_cart.py", diff=TESTS_DIFF, thought="make it pass", context="…")
    )
    assert (denied.approved, denied.by) == (False, "mcp")
    assert denied.reason == "leave the tests alone (edit tests/test_cart.py)"
    assert (denied.usage.api_calls, denied.usage.input_tokens, denied.usage.cost) == (1, 120, 0.0021)
    review = navigator.request_review(ReviewRequest(patch=CODE_DIFF, summary="rate"))
    assert (review.passed, review.comment, review.by) == (True, "looks right: rate", "mcp")
    assert navigator.request_guidance("why?").answer == "start from the failing test; you asked: why?"
    assert navigator.plan("Fix the rate.") == Plan(text="", by="mcp")  # a navigator that does not plan: no plan


class UsageBefore(BaseModel):
    """A navigator's usage as a client of before read it (r93 named its calls `api_calls`)."""

    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0  # r94 named them `cache_read_tokens`
    output_tokens: int = 0
    cost: float = 0.0


def test_a_client_of_before_reads_the_calls_a_served_navigator_made(rules: str) -> None:
    """Before: a served navigator's answer said only `api_calls`, and a client of before (its `calls`) read 0 calls,
    so a run with it counted its navigator's spend as no calls."""
    navigator = McpNavigator(rules)
    answer = navigator._run(navigator._call("request_permission", {"action": "edit shop/cart.py"}), 60)
    assert UsageBefore.model_validate(answer["usage"]).calls == 1
    assert NavigatorUsage.model_validate(answer["usage"]).api_calls == 1
    assert NavigatorUsage.model_validate(UsageBefore(calls=2).model_dump()).api_calls == 2  # a server of before


def test_a_client_of_before_reads_the_cache_reads_of_a_served_navigator(rules: str) -> None:
    """Before: a served navigator's answer said only `cache_read_tokens`, and a client of before (its
    `cached_tokens`) read 0 tokens from the prompt cache."""
    navigator = McpNavigator(rules)
    answer = navigator._run(navigator._call("request_permission", {"action": "edit shop/cart.py"}), 60)
    assert UsageBefore.model_validate(answer["usage"]).cached_tokens == 90
    assert NavigatorUsage.model_validate(answer["usage"]).cache_read_tokens == 90
    before = UsageBefore(cached_tokens=40).model_dump()  # a server of before
    assert NavigatorUsage.model_validate(before).cache_read_tokens == 40


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


@dataclass
class Held:
    process: subprocess.Popen[str]
    url: str
    answers: list[Any]  # what the permission's client got
    release: Callable[[], None]  # the navigator answers; the client's thread is waited for


@contextmanager
def held_permission(tmp_path: Path, *args: str) -> Iterator[Held]:
    """A SlowNavigator served (with ARGS) and asked a permission by a client in a thread, holding it until released:
    the permission is released and the server stopped on leaving, whatever happened."""
    asked, release = tmp_path / "asked", tmp_path / "release"
    env = {**os.environ, "RELEASE_NAVIGATOR": str(release), "ASKED_NAVIGATOR": str(asked)}
    process, url, _ = launch(tmp_path, ["--navigator", "remote_navigators:SlowNavigator", *args], env)
    answers: list[Any] = []
    client = threading.Thread(
        target=lambda: answers.append(McpNavigator(url).request_permission(PermissionRequest(action="edit a.py"))),
        daemon=True,
    )

    def released() -> None:
        release.touch()
        client.join(timeout=60)

    client.start()
    try:
        wait_for(lambda: asked.exists() or process.poll() is not None, 60, "the navigator to be asked")
        assert asked.exists(), "the navigator was never asked"
        yield Held(process, url, answers, released)
    finally:
        released()
        if process.poll() is None:
            stop(process)


def test_sigterm_mid_request_stops_the_server_once_the_answer_is_sent(tmp_path: Path, token: str) -> None:
    """`navigator serve` told to stop while its navigator thinks: it takes no new connection, the request under way
    gets its answer (the client asks nothing after it: the SDK's schema lookup comes first), then it exits 143."""
    with held_permission(tmp_path) as held:
        held.process.terminate()
        address = urlsplit(held.url)
        wait_for(lambda: not listening(address.hostname or "", address.port or 0), 60, "the server to stop listening")
        held.release()
        assert [(a.approved, a.reason, a.by) for a in held.answers] == [(True, "fine: edit a.py", "mcp")]
        assert held.process.wait(timeout=60) == 128 + signal.SIGTERM  # by itself: the one SIGTERM above
    (log,) = tmp_path.glob("serve-*.log")
    assert log.read_text() == "navigator: stopping once the request under way is answered\n"


def test_a_request_whose_client_gave_up_while_it_waited_its_turn_is_not_run(tmp_path: Path, token: str) -> None:
    """One request at a time: a review asked while the navigator thinks about a permission waits; its client gives up
    meanwhile, so once the permission is answered the review is not run (nothing spent on it), and the next one is."""
    log = tmp_path / "served.jsonl"
    with held_permission(tmp_path, "--log", str(log)) as held:
        with pytest.raises(NavigatorTimeout, match="did not answer within 0.5 s"):
            McpNavigator(held.url, review_timeout=0.5).request_review(ReviewRequest(patch="+x\n", summary="late"))
        held.release()
        later = McpNavigator(held.url).request_guidance("what next?")
        assert [answer.approved for answer in held.answers] == [True]
        assert later.answer.endswith("you asked: what next?")
        served = [json.loads(line)["tool"] for line in log.read_text().splitlines()]
        assert served == ["request_permission", "request_guidance"]
        assert stop(held.process) == 128 + signal.SIGTERM


def test_a_request_whose_client_gives_up_while_it_is_answered_is_cut_short(tmp_path: Path, token: str) -> None:
    """The model navigator served, warmed up by a first guidance: a permission's reply streams in slowly (a word every
    0.3 s, a minute and a half in all) and its client gives up after 4 s. The navigator stops reading the reply (the
    endpoint's stream is closed) and asks nothing more for it, so the guidance asked next is answered at once."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    slow = Reply(text="Thinking " * 300 + "<approve>too late</approve>", pace=0.3)
    log = tmp_path / "served.jsonl"
    with OpenAIServer(replies=["<answer>warm</answer>", slow, "<answer>go on</answer>"], models=["m"]) as endpoint:
        args = ["--model", "m", "--base-url", endpoint.url, "--repo", str(repo), "--log", str(log)]
        process, url, _ = launch(tmp_path, args, dict(os.environ))
        try:
            first = McpNavigator(url).request_guidance("where to start?")
            with pytest.raises(NavigatorTimeout, match="did not answer within 4 s"):
                McpNavigator(url, permission_timeout=4).request_permission(PermissionRequest(action="edit a.py"))
            later = McpNavigator(url).request_guidance("what next?")
        finally:
            assert stop(process) == 128 + signal.SIGTERM
    assert (first.answer, later.answer) == ("warm", "go on")
    streams = sorted(endpoint.streamed, key=lambda stream: stream[1])  # (chunks sent, of), in any order of their end
    assert streams[:2] == [(4, 4), (5, 5)] and streams[2][0] < streams[2][1] == 305, endpoint.streamed
    served = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(entry["tool"], entry.get("error")) for entry in served] == [
        ("request_guidance", None),
        ("request_permission", "navigator: the request's client gave up; its answer was cut short"),
        ("request_guidance", None),
    ]


def test_a_request_whose_client_gives_up_before_the_reply_starts_is_cut_short(tmp_path: Path, token: str) -> None:
    """A permission whose reply has not begun when its client gives up (a local model still reading the prompt: a
    minute before its first byte) is dropped then, not when the reply comes: the guidance asked next is answered at
    once, and the endpoint is asked nothing more for the abandoned request."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    slow = Reply(text="<approve>too late</approve>", delay=60)
    log = tmp_path / "served.jsonl"
    with OpenAIServer(replies=["<answer>warm</answer>", slow, "<answer>go on</answer>"], models=["m"]) as endpoint:
        args = ["--model", "m", "--base-url", endpoint.url, "--repo", str(repo), "--log", str(log)]
        process, url, _ = launch(tmp_path, args, dict(os.environ))
        try:
            McpNavigator(url).request_guidance("where to start?")
            with pytest.raises(NavigatorTimeout, match="did not answer within 3 s"):
                McpNavigator(url, permission_timeout=3).request_permission(PermissionRequest(action="edit a.py"))
            later = McpNavigator(url, review_timeout=20).request_guidance("what next?")
        finally:
            assert stop(process) == 128 + signal.SIGTERM
    assert later.answer == "go on" and len(endpoint.requests) == 3
    served = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(entry["tool"], entry.get("error")) for entry in served] == [
        ("request_guidance", None),
        ("request_permission", "navigator: the request's client gave up; its answer was cut short"),
        ("request_guidance", None),
    ]


def test_a_second_ctrl_c_stops_the_server_at_once_and_quietly(tmp_path: Path, token: str) -> None:
    """Ctrl-C stops `navigator serve` gracefully (the request under way would still get its answer, here a minute and
    a half of streaming), and says so; a second Ctrl-C meanwhile stops it at once, exit 130, without the tracebacks of
    the requests it cut short (uvicorn printed one per request, and one of its lifespan)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    slow = Reply(text="Thinking " * 300 + "<approve>too late</approve>", pace=0.3)
    with OpenAIServer(replies=[slow], models=["m"]) as endpoint:
        process, url, _ = launch(
            tmp_path, ["--model", "m", "--base-url", endpoint.url, "--repo", str(repo)], {**os.environ}
        )
        asking = threading.Thread(target=ask_permission, args=(url,), daemon=True)
        asking.start()
        wait_for(lambda: any(r.path.endswith("/completions") for r in endpoint.requests), 60, "the model to be asked")
        process.send_signal(signal.SIGINT)
        (log,) = tmp_path.glob("serve-*.log")
        said = "navigator: stopping once the request under way is answered (Ctrl-C again: at once)\n"
        wait_for(lambda: said in log.read_text(), 60, "the server to say what it waits for")
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    assert code == 130 and log.read_text().endswith(said) and "Traceback" not in log.read_text(), log.read_text()


def ask_permission(url: str) -> None:
    with contextlib.suppress(NavigatorError):  # the server goes away unanswered
        McpNavigator(url, permission_timeout=120).request_permission(PermissionRequest(action="edit a.py"))


def listening(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=5).close()
    except ConnectionRefusedError:
        return False
    return True


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 200),
        ({"Host": "attacker.example"}, 421),  # a rebound DNS name
        ({"Origin": "http://attacker.example"}, 403),  # a web page's request
    ],
)
def test_only_loopback_names_reach_the_served_navigator(
    rules_server: tuple[str, str], headers: dict[str, str], status: int
) -> None:
    import httpx

    url, token = rules_server
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "page", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    accept = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    response = httpx.post(url, json=body, headers={**accept, **headers}, timeout=60)
    assert response.status_code == status


def initialize(url: str, headers: dict[str, str]) -> Any:
    import httpx

    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "local", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    accept = {"Accept": "application/json, text/event-stream"}
    return httpx.post(url, json=body, headers={**accept, **headers}, timeout=60)


def test_the_served_navigator_answers_only_requests_with_its_token(
    rules: str, rules_server: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32 §8: any local process could call the tools and spend the navigator's model budget. A request without
    the token, or with another one, gets 401 and a Bearer challenge (as the MCP authorization spec answers); a client
    without it is told in one line what to set."""
    url, token = rules_server
    for headers, error in [({}, "invalid_request"), ({"Authorization": f"Bearer {token}x"}, "invalid_token")]:
        refused = initialize(url, headers)
        assert (refused.status_code, refused.json()) == (401, {"error": error})
        assert refused.headers["WWW-Authenticate"] == f'Bearer realm="llm-ide-navigator", error="{error}"'
    assert initialize(url, {"Authorization": f"Bearer {token}"}).status_code == 200
    assert McpNavigator(url).request_review(ReviewRequest(patch=CODE_DIFF, summary="s")).passed is True
    monkeypatch.setenv(TOKEN_VARIABLE, "not-the-token")
    with pytest.raises(NavigatorUnavailable) as failed:
        McpNavigator(url).request_review(ReviewRequest(patch=CODE_DIFF))
    assert str(failed.value) == (
        f"navigator at {url} refused the request (401): ${TOKEN_VARIABLE} must hold the token "
        "`llm-ide navigator serve` printed"
    )


def test_a_token_is_made_and_printed_at_start_unless_no_token_is_asked(tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items() if name != TOKEN_VARIABLE}
    process, url, printed = launch(tmp_path, ["--navigator", "remote_navigators:RulesNavigator"], env)
    try:
        (line,) = printed
        made = line.split()[2]
        assert line == f"navigator token: {made} (clients: export {TOKEN_VARIABLE}={made})\n" and len(made) >= 40
        assert initialize(url, {}).status_code == 401
        assert initialize(url, {"Authorization": f"Bearer {made}"}).status_code == 200
    finally:
        assert stop(process) == 128 + signal.SIGTERM
    told = env | {"PYTHONPROFILEIMPORTTIME": "1"}  # each module it imports, on its stderr (the log)
    process, url, printed = launch(tmp_path, ["--navigator", "remote_navigators:RulesNavigator", "--no-token"], told)
    try:
        assert printed == [] and initialize(url, {}).status_code == 200  # today's behaviour, asked for
    finally:
        assert stop(process) == 128 + signal.SIGTERM
    logs = [log.read_text() for log in tmp_path.glob("serve-*.log")]
    imported = {line.rsplit("|", 1)[1].strip() for text in logs for line in text.splitlines() if "|" in line}
    # a navigator of another party is served without the settings and LangGraph, which only the model navigator uses
    assert "mcp.server" in imported and not {"llm_ide.config", "langgraph"} & imported


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


def test_a_navigator_server_gone_mid_run_ends_the_run_with_one_line(tmp_path: Path, token: str) -> None:
    """The server answers the check before the run starts, and is stopped once the first step (an ungated view) is
    told: the edit's gate finds it gone."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    process, url, _ = launch(tmp_path, ["--navigator", "remote_navigators:RulesNavigator"], dict(os.environ))

    def gone(event: Any) -> None:
        if event.kind == "step" and process.poll() is None:
            assert stop(process) == 128 + signal.SIGTERM

    try:
        result = run_task(
            "Cart.total ignores quantities.",
            model=write_script(tmp_path / "driver.yaml", [VIEW, reflect(False, "price only"), FIX]),
            settings=load_config(
                "default", environment={"tools": []}, navigator={"mode": "mcp", "url": url, "plan": False}
            ),
            output_dir=tmp_path / "out",
            run_id="gone",
            repo=repo,
            on_event=gone,
        )
    finally:
        if process.poll() is None:
            stop(process)
    traj = load_trajectory(result.trajectory_path)
    assert result.exit_status == "error" == traj["info"]["exit_status"]
    assert result.error.startswith(f"navigator at {url} is unreachable: ConnectError") and "\n" not in result.error
    assert [o["action_type"] for o in traj["operations"]] == ["view"]  # the ungated view ran, the edit did not
    assert "price * quantity" not in (repo / "shop/cart.py").read_text()


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
