"""The navigator over MCP: real `llm-ide navigator serve` processes on a free loopback port, asked by the driver's
`McpNavigator` (the decisions with their usage, what a client of `before` reads) and reached only from loopback names
and with its token (the SDK's client and a driver run: test_navigator_mcp_clients.py; stopping:
test_navigator_mcp_shutdown.py)."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import isolated_environ
from navigator_mcp_support import CODE_DIFF, TESTS_DIFF, TOKEN_VARIABLE, launch, stop
from pydantic import BaseModel

from llm_ide.navigator.mcp_client import McpNavigator, NavigatorUnavailable
from llm_ide.navigator.protocol import (
    NavigatorUsage,
    PermissionRequest,
    Plan,
    ReviewRequest,
)


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
