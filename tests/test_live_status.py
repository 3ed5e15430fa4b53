"""While the model thinks the console is not silent: on a terminal a live line counts the seconds and tokens; with -v
the reply itself appears as it streams in. Real `llm-ide run` processes against the loopback OpenAI-compatible server
(a streaming one), in a pseudo-terminal or on a pipe."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, single_call
from conftest import ended, in_terminal, make_git_repo
from in_process import invoke
from openai_server import HANG, OpenAIServer, Reply
from swebench_fixtures import build_dataset

from llm_ide.cli.status import thinking_line

REPLIES = single_call(FIX_SCRIPT)  # one call per step
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def run_args(tmp_path: Path, url: str, *extra: str) -> list[str]:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    (config := tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    run = ["run", "--repo", str(repo), "--task", "Cart.total ignores quantities.", "--config", str(config)]
    return [sys.executable, "-m", "llm_ide", *run, "--model", "gpt-test", "--base-url", url, *extra]


def environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return {**env, "COLUMNS": "160", "TERM": "xterm-256color", "LLM_IDE_CONFIG": "off", "PYTHONFAULTHANDLER": "1"}


def test_verbose_shows_the_reply_as_it_streams_in(tmp_path: Path) -> None:
    gate = tmp_path / "go"
    replies: list[str | Reply] = [Reply(text=REPLIES[0], gate=str(gate)), *REPLIES[1:]]
    with OpenAIServer(replies=replies) as server:
        command = [*run_args(tmp_path, server.url, "-v"), "--output", str(tmp_path / "out")]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment(tmp_path))
        shown = bytearray()
        first_word = threading.Event()

        def read() -> None:
            while chunk := os.read(process.stdout.fileno(), 4096):
                shown.extend(chunk)
                if b"<thought>Read " in shown:
                    first_word.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert first_word.wait(120), shown.decode() + process.stderr.read().decode()
        assert process.poll() is None and b"the cart's total" not in shown  # the rest of the reply is held back
        gate.touch()
        assert process.wait(timeout=300) == 0, process.stderr.read().decode()
        reader.join(timeout=30)
    assert server.requests[0].body["stream"] is True
    assert server.requests[0].body["stream_options"] == {"include_usage": True}
    text = shown.decode()
    thought = "<thought>Read the cart's total[1](shop/cart.py:11).</thought>"
    assert text.index(thought) < text.index("step   1 view shop/cart.py")
    assert f"submitted after {len(REPLIES)} model calls" in text
    # the streamed usage was counted: no estimate warning
    assert "no token usage" not in process.stderr.read().decode()


def test_a_reply_stopped_while_it_streams_in_is_paid_for_and_counted_discarded(tmp_path: Path) -> None:
    """Ctrl-C while a reply streamed in: the provider bills the prompt and what it sent, but the call was counted
    nowhere (neither in the run's cost and tokens nor as discarded once the resumed run asked again)."""
    gate = tmp_path / "never"
    replies: list[str | Reply] = [Reply(text=REPLIES[0], gate=str(gate)), *REPLIES]
    with OpenAIServer(replies=replies) as server:
        command = [*run_args(tmp_path, server.url, "-v"), "--output", str(tmp_path / "out"), "--thread-id", "t"]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment(tmp_path))
        shown = bytearray()
        while b"<thought>Read " not in shown and (chunk := os.read(process.stdout.fileno(), 4096)):
            shown.extend(chunk)
        process.send_signal(signal.SIGINT)  # the reply's first word is in: the rest never comes
        code, stderr = ended(process)
        assert code == 130, stderr
        resumed = invoke(*command[3:], env=environment(tmp_path))  # a run to its end: in-process
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"submitted after {len(REPLIES)} model calls (+1 discarded)" in resumed.stdout
    stats = json.loads((tmp_path / "out" / "t.traj.json").read_text())["info"]["model_stats"]
    assert (stats["api_calls"], stats["discarded_calls"]) == (len(REPLIES), 1)
    prompts = [request.body["messages"] for request in server.requests]
    assert prompts[0] == prompts[1] and len(server.requests) == len(REPLIES) + 1  # asked again, whole
    with gzip.open(tmp_path / "out" / "t.calls.jsonl.gz", "rt") as log:
        first = json.loads(log.readline())
    assert (first["index"], first["finish_reason"], first["usage_estimated"]) == (0, "interrupted", True)
    assert first["response"].startswith("<thought>Read") and first["prompt_tokens"] > 100
    assert first["response_tokens"] > 0


def test_a_terminal_sees_a_live_line_while_the_model_thinks(tmp_path: Path) -> None:
    """The first reply (after its first word) waits until the terminal has shown two of the call's seconds."""
    thinking, gate = re.compile(r"model thinking · (\d+\.\d) s · prompt ~([\d,]+) tokens"), tmp_path / "gate"

    def watch(output: bytes) -> None:
        if len({seconds for seconds, _ in thinking.findall(ANSI.sub("", output.decode(errors="replace")))}) >= 2:
            gate.touch()

    with OpenAIServer(replies=[Reply(REPLIES[0], gate=str(gate)), *REPLIES[1:]]) as server:
        command = [*run_args(tmp_path, server.url), "--output", str(tmp_path / "out")]
        status, output = in_terminal(command, environment(tmp_path), watch=watch)
        assert status == 0, output.decode(errors="replace")
    screen = ANSI.sub("", output.decode(errors="replace"))
    lines = thinking.findall(screen)
    assert len({seconds for seconds, _ in lines}) >= 2, screen  # the seconds count while a call is under way
    assert all(int(tokens.replace(",", "")) > 100 for _, tokens in lines)  # the prompt's size, estimated
    assert "step   1 view shop/cart.py" in screen and f"submitted after {len(REPLIES)} model calls" in screen


@pytest.mark.parametrize(
    ("out", "first", "line"),
    [
        (0, None, "model thinking · 4.0 s · prompt ~1,200 tokens"),
        (1, 9.5, "model thinking · 4.0 s · prompt ~1,200 tokens · 1 token out"),  # (it said "1 tokens out")
        (1234, 8.0, "model thinking · 4.0 s · prompt ~1,200 tokens · 1,234 tokens out · 617.0 tokens/s"),
    ],
)
def test_the_thinking_line_counts_the_tokens_out_and_their_rate_once_a_second_has_passed(
    out: int, first: float | None, line: str
) -> None:
    call: dict[str, float | int | str] = {
        "started": 6.0,
        "prompt": 1200,
        "out": out,
        **({"first": first} if first else {}),
    }
    assert thinking_line([call], now=10.0) == line


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_run_stopped_whose_patch_then_cannot_be_had_says_so(tmp_path: Path, signum: int) -> None:
    """Ctrl-C (or SIGTERM) while the model thinks, the repository's .git deleted meanwhile: the run's patch cannot be
    taken. Before: the run's log alone said so; the console and the trajectory said only 'interrupted by ...' and how
    to resume it."""
    with OpenAIServer(replies=[REPLIES[0], HANG], hang_seconds=60) as server:
        command = [*run_args(tmp_path, server.url), "--output", str(tmp_path / "out"), "--thread-id", "t"]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment(tmp_path))
        while len(server.requests) < 2:  # the second step's call is out: the first step done
            time.sleep(0.01)
        shutil.rmtree(tmp_path / "repo" / ".git")
        process.send_signal(signum)
        code, stderr = ended(process)
    assert code == (130 if signum == signal.SIGINT else 128 + signum), stderr
    error = json.loads((tmp_path / "out" / "t.traj.json").read_text())["info"]["error"]
    assert error.startswith("interrupted by ") and "patch extraction failed: the repository's git directory" in error
    assert " ".join(error.split()) in " ".join(stderr.split()) and "Traceback" not in stderr


def test_an_instance_stopped_whose_patch_then_cannot_be_had_says_so(tmp_path: Path) -> None:
    """swebench-single's Ctrl-C said only where the instance was saved and how to resume it, as run's did before
    (above): the patch's failure was in its trajectory and log alone."""
    dataset, rows = build_dataset(tmp_path / "data", 1)
    (config := tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    args = ["swebench-single", "--subset", str(dataset), "-i", "0", "--environment", "local", "-c", str(config)]
    with OpenAIServer(replies=[REPLIES[0], HANG], hang_seconds=60) as server:
        command = [sys.executable, "-m", "llm_ide", *args, "-m", "gpt-test", "--base-url", server.url]
        command += ["-o", str(tmp_path / "out")]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment(tmp_path))
        while len(server.requests) < 2:  # the second step's call is out: the first step done
            time.sleep(0.01)
        folder = tmp_path / "out" / rows[0]["instance_id"]
        shutil.rmtree(folder / "repo" / ".git")
        process.send_signal(signal.SIGINT)
        code, stderr = ended(process)
    assert code == 130, stderr
    error = json.loads((folder / f"{rows[0]['instance_id']}.traj.json").read_text())["info"]["error"]
    assert "patch extraction failed: the repository's git directory" in error, error
    assert " ".join(error.split()) in " ".join(stderr.split()) and "Traceback" not in stderr
