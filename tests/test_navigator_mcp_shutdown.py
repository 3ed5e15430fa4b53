"""A served navigator stopping and its clients leaving: SIGTERM mid-request answers the request then exits, a second
Ctrl-C stops it at once, a request whose client gave up (waiting its turn, while answered, before the reply) is not
run or is cut short, and a server gone mid-run ends the run with one line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from agent_script import (
    BUGGY_FILES,
    reflect,
    write_script,
)
from agent_script import (
    CART_FIX as FIX,
)
from agent_script import (
    CART_VIEW as VIEW,
)
from conftest import make_git_repo, wait_for
from navigator_mcp_support import launch, stop
from openai_server import OpenAIServer, Reply

from llm_ide.config import load_config
from llm_ide.navigator.mcp_client import McpNavigator
from llm_ide.navigator.protocol import (
    NavigatorError,
    NavigatorTimeout,
    PermissionRequest,
    ReviewRequest,
)
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory

# seconds a client waits before it gives up: its request (a warm server's round trip, and the model navigator's call
# reaching the endpoint: ~50 ms here, loaded or not) reaches the server well within, however loaded
GIVE_UP = 1.5


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
        with pytest.raises(NavigatorTimeout, match=f"did not answer within {GIVE_UP} s"):
            McpNavigator(held.url, review_timeout=GIVE_UP).request_review(ReviewRequest(patch="+x\n", summary="late"))
        held.release()
        later = McpNavigator(held.url).request_guidance("what next?")
        assert [answer.approved for answer in held.answers] == [True]
        assert later.answer.endswith("you asked: what next?")
        served = [json.loads(line)["tool"] for line in log.read_text().splitlines()]
        assert served == ["request_permission", "request_guidance"]
        assert stop(held.process) == 128 + signal.SIGTERM


def test_a_request_whose_client_gives_up_while_it_is_answered_is_cut_short(tmp_path: Path, token: str) -> None:
    """The model navigator served, warmed up by a first guidance: a permission's reply streams in slowly (a word every
    0.3 s, a minute and a half in all) and its client gives up after GIVE_UP s. The navigator stops reading the reply
    (the endpoint's stream is closed) and asks nothing more for it, so the guidance asked next is answered at once."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    slow = Reply(text="Thinking " * 300 + "<approve>too late</approve>", pace=0.3)
    log = tmp_path / "served.jsonl"
    with OpenAIServer(replies=["<answer>warm</answer>", slow, "<answer>go on</answer>"], models=["m"]) as endpoint:
        args = ["--model", "m", "--base-url", endpoint.url, "--repo", str(repo), "--log", str(log)]
        process, url, _ = launch(tmp_path, args, dict(os.environ))
        try:
            first = McpNavigator(url).request_guidance("where to start?")
            with pytest.raises(NavigatorTimeout, match=f"did not answer within {GIVE_UP} s"):
                McpNavigator(url, permission_timeout=GIVE_UP).request_permission(PermissionRequest(action="edit a.py"))
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
            with pytest.raises(NavigatorTimeout, match=f"did not answer within {GIVE_UP} s"):
                McpNavigator(url, permission_timeout=GIVE_UP).request_permission(PermissionRequest(action="edit a.py"))
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
    """Whether a connection is taken: one reset is left in a listener's queue as the listener closes (no longer)."""
    try:
        socket.create_connection((host, port), timeout=5).close()
    except (ConnectionRefusedError, ConnectionResetError):
        return False
    return True


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
