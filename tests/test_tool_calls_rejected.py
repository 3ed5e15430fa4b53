"""Replies rejected as format errors (an unknown tool, arguments not JSON, no call; a tool call in a run of
tags; text without an action): said to the model, recorded, shown by `inspect`, and told on the console reply by
reply as it happens (a real `llm-ide run`)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from agent_script import BUGGY_FILES, reflect, write_script
from conftest import make_git_repo
from in_process import invoke
from openai_server import OpenAIServer, Reply
from tool_calls_support import TASK, run_at, tool_replies, two_call_tool_script

from llm_ide.inspector.load import load_run
from llm_ide.inspector.rejected import rejected_replies


@pytest.fixture(autouse=True)
def keyless(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")


def test_unusable_tool_calls_are_format_errors_said_to_the_model_and_the_run_records_its_time(tmp_path: Path) -> None:
    """An unknown tool, arguments that are not JSON, a reply without a call: each asked again with why (the
    rejected call answered with it), the third ends the run with format_error, its time and usage recorded."""
    replies: list[str | int | Reply] = [
        Reply("I open it.", tool_calls=(("open_file", {"path": "shop/cart.py"}),)),
        Reply("Read it.", tool_calls=(("view", '{"path": "shop/cart.py",'),)),
        "I think the loop is wrong.",
    ]
    with OpenAIServer(replies=replies) as server:
        result, trajectory = run_at(tmp_path, "gpt-4o", server.url, model={"action_format": "tools"})
    assert result.exit_status == "format_error" and result.submission == ""
    info = trajectory["info"]
    assert info["elapsed"] > 0 and info["model_stats"]["api_calls"] == 3
    assert info["model_stats"]["input_tokens"] > 0 and info["model_stats"]["output_tokens"] > 0
    second, third = server.requests[1].body["messages"], server.requests[2].body["messages"]
    rejected, answer = second[-2:]
    assert rejected["tool_calls"][0]["function"] == {"name": "open_file", "arguments": '{"path": "shop/cart.py"}'}
    assert answer["role"] == "tool" and answer["tool_call_id"] == rejected["tool_calls"][0]["id"]
    assert answer["content"].startswith(
        "Your response could not be used: unknown tool 'open_file'; the tools are view, view_symbol, search, edit, "
        "create, bash, submit\nRespond again: your text in exactly this form, and one tool call:"
    )
    assert third[-2]["tool_calls"][0]["function"]["arguments"] == json.dumps({"arguments": '{"path": "shop/cart.py",'})
    assert third[-1]["content"].startswith(
        "Your response could not be used: `view`: the action's parameters are not valid JSON (Expecting property name"
    )
    assert [message["role"] for message in third[:2]] == ["system", "user"]  # one rejected exchange at a time
    calls = trajectory["model_calls"]
    assert calls[0]["response"] == "I open it."
    assert [(c["name"], c["arguments"]) for c in calls[0]["tool_calls"]] == [("open_file", '{"path": "shop/cart.py"}')]
    assert calls[2]["response"] == "I think the loop is wrong." and "tool_calls" not in calls[2]
    why = rejected_replies(calls, info)  # what `llm-ide inspect --full` and the page show
    assert why[0].startswith("unknown tool 'open_file'; the tools are view, view_symbol,")
    assert why[1].startswith("`view`: the action's parameters are not valid JSON (Expecting property name")
    assert why[2] == info["error"].partition("; the last: ")[2] != "" and why[2].startswith("no tool call")
    full = invoke("inspect", "--full", str(result.trajectory_path)).stdout.splitlines()
    start = full.index("rejected replies (format errors): 3")
    assert full[start + 1 : start + 4] == [
        f"✗ call 0 (step 1, act): {why[0]}",
        "    I open it.",
        '    → open_file {"path": "shop/cart.py"}',
    ]
    page = load_run(result.trajectory_path).calls
    assert page[1].response == 'Read it.\n→ view {"path": "shop/cart.py",' and page[2].response == calls[2]["response"]


def test_a_tool_call_in_a_run_of_tags_is_a_format_error_that_says_so(tmp_path: Path) -> None:
    """`model.action_format: text`: a reply that only calls a tool is asked again with why, naming the call, until
    `agent.max_format_errors` in a row end the run; nothing is run."""
    script = write_script(tmp_path / "script.yaml", two_call_tool_script())
    values = {"model": {"action_format": "text"}, "agent": {"max_format_errors": 2}}
    result, trajectory = run_at(tmp_path, script, None, **values)
    assert (result.exit_status, trajectory["operations"]) == ("format_error", [])
    whys = [call["prompt"].rpartition("[user]\n")[2] for call in trajectory["model_calls"][1:]]
    assert len(trajectory["model_calls"]) == 2 and "<view>" in trajectory["model_calls"][0]["prompt"]
    assert "the reply's tool call `view` is no action here: the run's actions are tags, not tools" in whys[0]
    assert "the reply's tool call `bash` is no action here" in result.error  # the second item's


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return {**env, "COLUMNS": "200", "LLM_IDE_CONFIG": "off"}


def test_each_rejected_reply_is_told_on_the_console_as_it_happens(tmp_path: Path) -> None:
    """A real `llm-ide run`: the first rejected reply's line is out while the next request is still unanswered (the
    server holds it until the test has read that line), the second's follows, then the steps of the run."""
    gate = tmp_path / "gate"
    replies: list[str | int | Reply] = [
        Reply("I open it.", tool_calls=(("open_file", {"path": "shop/cart.py"}),)),
        Reply("Read it.", tool_calls=(("view", "{not json"),), gate=str(gate)),
        *tool_replies(),
    ]
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    (config := tmp_path / "c.yaml").write_text("environment: {tools: []}\nmodel: {action_format: tools}\n")
    with OpenAIServer(replies=replies) as server:
        run = ["run", "--repo", str(repo), "--task", TASK, "--config", str(config), "--model", "gpt-4o-mini"]
        run += ["--base-url", server.url, "--thread-id", "t", "--output", str(tmp_path / "out")]
        argv = [sys.executable, "-m", "llm_ide", *run]
        with (tmp_path / "stderr").open("w") as stderr:
            process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True, env=cli_env())
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=lambda: [*map(lines.put, process.stdout or []), lines.put(None)])
        reader.start()
        seen: list[str | None] = []
        while not seen or not (seen[-1] is None or "reply rejected" in seen[-1]):
            seen.append(lines.get(timeout=120))
        before_gate = seen[-1]  # the second reply is held back until the first rejection is on the console
        gate.touch()
        process.wait(timeout=300)
        reader.join()
    seen += [*iter(lines.get, None)] if seen[-1] is not None else []
    out = [line.rstrip("\n") for line in seen if line is not None]
    assert process.returncode == 0, "\n".join(out) + (tmp_path / "stderr").read_text()
    first = out.index(
        "step   1 ✗ reply rejected (1 of 3 in a row): unknown tool 'open_file'; the tools are view, view_symbol, "
        "search, edit, create, bash, submit"
    )
    assert before_gate == out[first] + "\n"
    second = out.index(
        "step   1 ✗ reply rejected (2 of 3 in a row): `view`: the action's parameters are not valid JSON "
        "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"
    )
    assert first < second < out.index("step   1 view shop/cart.py:1-15")
    assert sum("reply rejected" in line for line in out) == 2 and len(server.requests) == 7  # each told once


def test_garbage_until_format_error_is_told_reply_by_reply_and_the_time_is_recorded(tmp_path: Path) -> None:
    """The text format through a real `llm-ide run`: three replies without an action, three lines saying why."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    (config := tmp_path / "c.yaml").write_text("environment: {tools: []}\nmodel: {max_retries: 0}\n")
    with OpenAIServer(replies=["one", "two", reflect(False, "A reflection alone is no action.")]) as server:
        run = ["run", "--repo", str(repo), "--task", TASK, "--config", str(config), "--model", "gpt-4o-mini"]
        run += ["--base-url", server.url, "--thread-id", "t", "--output", str(tmp_path / "out")]
        done = invoke(*run, env=cli_env())
    assert done.returncode == 1, done.stdout + done.stderr
    told = [line for line in done.stdout.splitlines() if "reply rejected" in line]
    assert [line.split(":", 1)[0] for line in told] == [
        f"step   1 ✗ reply rejected ({n} of 3 in a row)" for n in (1, 2, 3)
    ]
    whole = ": missing the action: a tag named after its type (view, view_symbol, search, edit, create, bash, submit)"
    assert all(line.endswith(f"{whole} holding its JSON parameters") for line in told)  # the run's own, no word cut
    assert "format_error after 3 model calls" in done.stdout
    info = json.loads((tmp_path / "out" / "t.traj.json").read_text())["info"]
    assert info["exit_status"] == "format_error" and info["elapsed"] > 0
    assert info["model_stats"]["api_calls"] == 3 and info["model_stats"]["input_tokens"] > 0
