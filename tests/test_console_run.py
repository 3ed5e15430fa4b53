"""The console of a real run against the loopback OpenAI-compatible server: the reasoning at each step (unless
--no-thoughts), an unpriced model shown as unpriced with its tokens and warned about once, warnings and retries on
their own lines even while the live line is up (a pseudo-terminal), and `inspect --full` showing the rejected
replies and why."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, single_call, write_script
from conftest import in_terminal, make_git_repo
from in_process import invoke
from openai_replies import Reply
from openai_server import OpenAIServer

from llm_ide.cli.console import usage_text
from llm_ide.run.outputs import describe_action

REPLIES = single_call(FIX_SCRIPT)
FIRST_THOUGHT = "Read the cart's total[1](shop/cart.py:11)."
CLI = [sys.executable, "-m", "llm_ide"]  # a terminal: a child of its own
ESCAPES = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def command(folder: Path, url: str, model: str, *extra: str) -> list[str]:
    repo = make_git_repo(folder / "repo", BUGGY_FILES)
    (config := folder / "c.yaml").write_text(
        "environment: {tools: []}\nmodel: {max_retries: 2, retry_base_delay: 0.01}\n"
    )
    run = ["run", "--repo", str(repo), "--task", "Cart.total ignores quantities.", "--config", str(config)]
    run += ["--model", model, "--base-url", url, "--thread-id", "t", "--output", str(folder / "out")]
    return [*run, *extra]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return {**env, "COLUMNS": "200", "TERM": "xterm-256color", "LLM_IDE_CONFIG": "off"}


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return invoke(*args, env=environment())


def test_each_step_shows_its_reasoning_and_the_cost_so_far(tmp_path: Path) -> None:
    with OpenAIServer(replies=REPLIES) as server:
        result = run(command(tmp_path, server.url, "gpt-4o-mini"))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    step = lines.index("step   1 view shop/cart.py:1-15")
    assert lines[step + 1] == f"         {FIRST_THOUGHT}"  # the reasoning, under its action
    assert lines[step + 2].startswith("         → ") and re.search(r"\$0\.\d{4}$", lines[step + 2])
    assert "has no price" not in result.stderr and "unpriced" not in result.stdout
    logged = [line for line in (tmp_path / "out" / "t.log").read_text().splitlines() if ": step " in line]
    assert logged and all(re.search(r"\(cost \$0\.\d{4}\)$", line) for line in logged), logged
    assert re.search(r"submitted after \d+ model calls, \d+\+\d+ tokens, \$0\.\d{4}$", result.stdout, re.M)


def test_an_unpriced_model_is_shown_unpriced_with_its_tokens_and_warned_about_once(tmp_path: Path) -> None:
    with OpenAIServer(replies=REPLIES) as server:
        result = run(command(tmp_path, server.url, "local/qwen2.5-coder", "--no-thoughts"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.count("has no price") == 1, result.stderr
    assert "$0.0000" not in result.stdout and "$" not in result.stdout
    steps = [line for line in result.stdout.splitlines() if line.startswith("         → ")]
    assert steps and all(re.search(r"  [\d,]+ tokens, unpriced$", line) for line in steps), steps
    totals = [int(line.rsplit("  ", 1)[1].split()[0].replace(",", "")) for line in steps]
    assert totals == sorted(totals) and totals[0] > 0  # the run's tokens so far, growing
    assert re.search(r"submitted after \d+ model calls, \d+\+\d+ tokens, unpriced$", result.stdout, re.M)
    assert FIRST_THOUGHT not in result.stdout  # --no-thoughts
    logged = [line for line in (tmp_path / "out" / "t.log").read_text().splitlines() if ": step " in line]
    assert logged and all(line.endswith("(cost unpriced)") for line in logged), logged  # (it said `cost 0.0000`)

    page = tmp_path / "page.html"  # the inspector's page says so too: no $0, no cost chart
    assert run(["inspect", str(tmp_path / "out" / "t.traj.json"), "--html", str(page)]).returncode == 0
    html = page.read_text()
    assert '<span id="cost">unpriced</span>' in html and "$0.0000" not in html and "cost ($)" not in html


def test_warnings_and_retries_land_on_their_own_lines_while_the_live_line_is_up(tmp_path: Path) -> None:
    """On a terminal: the price warning (before the run), then a 429 answered while the spinner turns: each is a
    line of its own, above the live line, never glued to it."""
    with OpenAIServer(replies=[Reply(status=429, delay=0.4), *REPLIES]) as server:  # the live line up before it
        status, text = in_terminal([*CLI, *command(tmp_path, server.url, "local/qwen2.5-coder")], environment())
    assert status == 0, text.decode(errors="replace")
    assert text.count(b"has no price") == 1
    retry = re.search(rb"model local/qwen2\.5-coder: [^\r\n]*429[^\r\n]*retry 1/2", text)
    assert retry is not None, text.decode(errors="replace")
    before = re.sub(rb"(\x1b\[[0-9;]*m)+$", b"", text[: retry.start()])  # its colour set
    assert before.endswith(b"\n") or before.endswith(b"\r\x1b[2K"), before[-200:]  # a line start, the spinner erased
    assert b"model thinking" in before  # the live line was up when the retry came
    line = ESCAPES.sub(b"", text[retry.start() :].split(b"\n", 1)[0])
    assert b"model thinking" not in line and b"\xe2\xa0" not in line  # no spinner text or glyph in the line


def test_inspect_full_shows_the_rejected_replies_and_why(tmp_path: Path) -> None:
    garbage = "I will look at the cart first, no tags here."
    with OpenAIServer(replies=[garbage, *REPLIES]) as server:
        result = run(command(tmp_path / "one", server.url, "gpt-4o-mini"))
    assert result.returncode == 0, result.stdout + result.stderr
    trajectory = str(tmp_path / "one" / "out" / "t.traj.json")
    full = run(["inspect", "--full", trajectory])
    assert full.returncode == 0, full.stderr
    lines = full.stdout.splitlines()
    start = lines.index("rejected replies (format errors): 1")
    assert lines[start + 1].startswith("✗ call 0 (step 1, act): missing the action")
    assert lines[start + 2] == f"    {garbage}"
    plain = run(["inspect", trajectory])
    assert "rejected replies" not in plain.stdout

    with OpenAIServer(replies=["one", "two", "three"]) as server:
        ended = run(command(tmp_path / "two", server.url, "gpt-4o-mini"))
    assert ended.returncode == 1 and "format_error after 3 model calls" in ended.stdout, ended.stdout + ended.stderr
    full = run(["inspect", "--full", str(tmp_path / "two" / "out" / "t.traj.json")])
    rejected = [line for line in full.stdout.splitlines() if line.startswith("✗ call ")]
    assert [line.split(":", 1)[0] for line in rejected] == [f"✗ call {i} (step 1, act)" for i in range(3)]
    reasons = [line.split(": ", 1)[1] for line in rejected]  # the last one's read from the run's error
    assert reasons[0].startswith("missing the action") and reasons == [reasons[0]] * 3
    ended_by = "3 replies in a row could not be used (agent.max_format_errors: 3); the last: "
    assert f"ended: {ended_by}{reasons[0]}" in full.stdout
    assert "    three" in full.stdout.splitlines()
    page = tmp_path / "two" / "page.html"
    assert run(["inspect", str(tmp_path / "two" / "out" / "t.traj.json"), "--html", str(page)]).returncode == 0
    html = page.read_text()
    assert f"<b>ended:</b> {ended_by}{reasons[0]}" in html and "Rejected replies (format errors): 3" in html
    assert [html.count(f"✗ call {i} (step 1, act): {reasons[0]}") for i in range(3)] == [1, 1, 1]


LESSON = "The odd-length branch of median is correct (median([3, 1, 2]) == 2); only even-length input is wrong."


@pytest.mark.parametrize(
    ("flag", "told"),
    [
        ("--thoughts", f"step   2 ✗ a failed alternative: {LESSON}"),
        ("--no-thoughts", "step   2 ✗ a failed alternative"),
    ],
)
def test_an_operation_judged_a_failed_alternative_is_told_with_its_lesson_once_its_verdict_comes(
    flag: str, told: str, tmp_path: Path
) -> None:
    """The demo's second step (a refuted hypothesis) is judged bad with the third step's reply: the console says so
    between the two, with its lesson (without it under --no-thoughts), and no other step is marked."""
    result = invoke("demo", "--output", str(tmp_path / "demo"), flag, env=environment())
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    steps = [line for line in lines if line.startswith("step ")]
    assert steps[1].startswith("step   2 bash: python3 -c") and steps[3] == "step   3 edit calc/stats.py"
    assert steps[2] == told and [line for line in lines if "✗" in line] == [told]


@pytest.mark.parametrize(
    ("params", "label"),
    [
        ({"path": "a.py"}, "view a.py"),  # the whole file: no range (it read `a.py:1-` before)
        ({"path": "a.py", "start_line": 3}, "view a.py:3-"),
        ({"path": "a.py", "start_line": 3, "end_line": 9}, "view a.py:3-9"),
        ({"path": "a.py", "end_line": 9}, "view a.py:1-9"),
    ],
)
def test_a_view_steps_line_names_the_lines_asked_for(params: dict[str, int | str], label: str) -> None:
    assert describe_action(SimpleNamespace(action_type="view", action_params=params)) == label


def test_a_task_typed_at_the_terminal_is_asked_for_and_run(tmp_path: Path) -> None:
    """`--task-file -` with the terminal as standard input waited without a word (a newcomer saw nothing happen):
    now a line says to type the task and end it with Ctrl-D; what was typed is the run's task."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    (config := tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    model = write_script(tmp_path / "s.yaml", FIX_SCRIPT)
    argv = [*CLI, "run", "--repo", str(repo), "--task-file", "-", "-m", model, "-c", str(config), "-o", "out"]
    primary, secondary = pty.openpty()
    process = subprocess.Popen(argv + ["--thread-id", "t"], stdin=secondary, stdout=secondary, stderr=secondary,
                               cwd=tmp_path, env=environment())  # fmt: skip
    os.close(secondary)
    output = bytearray()
    try:
        while b"Ctrl-D" not in output and select.select([primary], [], [], 60)[0]:
            output.extend(os.read(primary, 4096))
        said = ESCAPES.sub(b"", bytes(output)).decode()
        assert "… --task-file -: type the task, then Ctrl-D on a line of its own" in said, said
        os.write(primary, b"Cart.total ignores quantities.\n\x04")
        with contextlib.suppress(OSError):  # EIO: the process closed the terminal
            while chunk := os.read(primary, 4096):
                output.extend(chunk)
        assert process.wait(timeout=60) == 0, output.decode(errors="replace")
    finally:
        process.kill()
        os.close(primary)
    trajectory = json.loads((tmp_path / "out" / "t.traj.json").read_text())
    assert trajectory["task"] == "Cart.total ignores quantities.\n" and trajectory["info"]["exit_status"] == "submitted"


@pytest.mark.parametrize(
    ("estimated", "said"), [(0, "3+1 tokens, "), (1, "(estimated for 1 call)"), (2, "(estimated for 2 calls)")]
)
def test_the_usage_says_how_many_calls_were_estimated(estimated: int, said: str) -> None:
    stats = {"api_calls": 3, "estimated_calls": estimated, "input_tokens": 3, "output_tokens": 1, "cost": 0.0}
    assert said in usage_text(stats, priced=False)


@pytest.mark.parametrize("flag", ["-v", "--verbose"])
def test_the_demo_streams_each_reply_with_verbose_as_run_does(flag: str, tmp_path: Path) -> None:
    """`llm-ide demo -v` was "No such option": run's -v/--verbose (each model reply as it streams in)."""
    quiet = invoke("demo", "--output", str(tmp_path / "quiet"), env=environment())
    result = invoke("demo", "--output", str(tmp_path / "demo"), flag, env=environment())
    assert (quiet.returncode, result.returncode) == (0, 0), result.stdout + result.stderr
    reply = '<action_params>{"path": "calc/stats.py", "start_line": 1, "end_line": 25}</action_params>'
    assert reply in result.stdout and reply not in quiet.stdout
