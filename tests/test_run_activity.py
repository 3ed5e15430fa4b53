"""A run shows what it is doing (issue 40 §3, §5): a command's latest output lines and seconds as it runs — `command`
events for Python callers, the live display on a terminal — the step's preview its first meaningful line, and
`info.elapsed` counting the model's and the commands' time however the run ends."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from agent_script import BUGGY_FILES, act, reflect, single_call, write_script
from conftest import in_terminal, interrupt_when, make_git_repo
from in_process import invoke
from openai_server import OpenAIServer

from llm_ide.cli.console import first_meaningful_line
from llm_ide.config import load_config
from llm_ide.run.outputs import RunEvent
from llm_ide.run.single import run_task

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def gated_command(tmp_path: Path) -> str:
    """Prints a line, waits for the test's gate, prints another, then a rule and a summary."""
    gate = tmp_path / "gate"
    return f"echo first line; while [ ! -e {gate} ]; do sleep 0.05; done; echo second line; echo -----; echo done"


def test_a_commands_output_is_told_as_it_comes_and_the_step_shows_its_first_meaningful_line(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    command = gated_command(tmp_path)
    steps = [
        act("Run it.", "bash", command=command),
        reflect(False, "ran"),
        act("Again.", "bash", command="echo again"),
    ]
    script = single_call([*steps, reflect(False, "ran"), act("Done.", "submit")])
    events: list[RunEvent] = []

    def on_event(event: RunEvent) -> None:
        events.append(event)
        if event.kind == "command" and event.command.kind == "output" and "first line" in event.command.lines:
            (tmp_path / "gate").touch()  # the first line was told while the command still ran

    result = run_task(
        "Run the command.",
        model=write_script(tmp_path / "s.yaml", script),
        settings=load_config(environment={"tools": []}),
        output_dir=tmp_path / "out",
        run_id="r",
        repo=repo,
        on_event=on_event,
    )
    assert result.exit_status == "submitted", result.error
    commands = [event for event in events if event.kind == "command"]
    again = [(event.step, event.command.kind) for event in commands if event.command.command == "echo again"]
    assert again[0] == (2, "start") and again[-1] == (2, "end") and {step for step, _ in again} == {2}  # all were 0
    told = [event.command for event in commands if event.command.command == command]
    assert {event.step for event in commands if event.command.command == command} == {1}
    kinds = [progress.kind for progress in told]
    assert kinds[0] == "start" and kinds[-1] == "end" and "output" in kinds[1:-1]
    assert {progress.command for progress in told} == {command}
    first = next(progress for progress in told if progress.kind == "output")
    assert first.lines == ("first line",) and first.returncode is None  # told before the command ended
    assert told[-1].lines == ("first line", "second line", "-----", "done") and told[-1].returncode == 0
    assert told[-1].seconds >= first.seconds
    step = next(event for event in events if event.kind == "step")
    assert step.step == 1 and first_meaningful_line(step.observation) == "first line"
    assert first_meaningful_line("\n------\n.....\nRan 3 tests in 0.1s\n") == "Ran 3 tests in 0.1s"
    assert first_meaningful_line("-----\n=====\n") == "-----"


def test_info_elapsed_counts_the_time_of_a_run_that_ends_in_a_model_error(tmp_path: Path) -> None:
    """The endpoint hangs: three attempts of 0.3 s each (no back-off to speak of), then model_error; the time is in
    the trajectory."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    with OpenAIServer(replies=["hang"]) as server:
        result = run_task(
            "Fix it.",
            model="gpt-test",
            base_url=server.url,
            settings=load_config(
                environment={"tools": []}, model={"timeout": 0.3, "max_retries": 2, "retry_base_delay": 0.01}
            ),
            output_dir=tmp_path / "out",
            run_id="r",
            repo=repo,
        )
    assert result.exit_status == "model_error" and "model.timeout" in result.error
    info = json.loads(result.trajectory_path.read_text())["info"]
    assert info["elapsed"] >= 3 * 0.3 and info["error"] == result.error


def run_argv(tmp_path: Path, command: str) -> list[str]:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    steps = [act("Build.", "bash", command=command), reflect(False, "built"), act("Done.", "submit")]
    script = write_script(tmp_path / "s.yaml", single_call(steps))
    (config := tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    argv = [sys.executable, "-m", "llm_ide", "run", "--repo", str(repo), "--task", "Build it.", "--model", script]
    return [*argv, "--config", str(config), "--output", str(tmp_path / "out"), "--thread-id", "t"]


ENV = {**os.environ, "COLUMNS": "160", "TERM": "xterm-256color", "LLM_IDE_CONFIG": "off"}


def test_a_terminal_shows_the_running_command_its_seconds_and_latest_line(tmp_path: Path) -> None:
    """A real `llm-ide run` in a pseudo-terminal; the command prints, then works until the terminal has shown two of
    its seconds (a gate the test opens)."""
    (tmp_path / "wait").write_text(f"until [ -e {tmp_path / 'gate'} ]; do sleep 0.05; done\n")
    command = "echo compiling module one; sh ../wait; echo linked"  # short: the live line shows it whole
    line = re.compile(re.escape(f"running {command} · ") + r"(\d+\.\d) s")

    def watch(output: bytes) -> None:
        if len(set(line.findall(ANSI.sub("", output.decode(errors="replace"))))) >= 2:
            (tmp_path / "gate").touch()

    status, output = in_terminal(run_argv(tmp_path, command), ENV, watch=watch)
    screen = ANSI.sub("", output.decode(errors="replace"))
    assert status == 0, screen
    assert len(set(line.findall(screen))) >= 2, screen  # the seconds count while it runs
    shown = screen.index("compiling module one", screen.index("running echo"))
    assert shown < screen.index("step   1 bash: echo compiling")  # its output, live, before the step's line
    assert "→ compiling module one" in screen and "submitted after 2 model calls" in screen


def test_ctrl_c_during_a_command_keeps_the_runs_time(tmp_path: Path) -> None:
    """Ctrl-C (synchronised on a file the command writes) ends the run `interrupted`, its time in `info.elapsed`."""
    started = tmp_path / "repo" / "started"  # where the (sandboxed) command may write
    gate = tmp_path / "gate"  # present for the rerun: its command ends at once
    wait = f"sleep 1.5; touch started; while [ ! -e {gate} ]; do sleep 0.05; done"
    argv = run_argv(tmp_path, f"[ -e {gate} ] || {{ {wait}; }}")
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    stdout, stderr = interrupt_when(started, process)
    assert process.returncode == 130, stdout + stderr
    info = json.loads((tmp_path / "out" / "t.traj.json").read_text())["info"]
    assert info["exit_status"] == "interrupted" and info["elapsed"] > 0
    assert any(line.startswith("interrupted: saved at its last completed step") for line in stderr.splitlines())
    gate.touch()  # the rerun runs the cut command again (at once now) and finishes
    rerun = invoke(*argv[3:], env=ENV)  # a run to its end: in-process
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    resumed = json.loads((tmp_path / "out" / "t.traj.json").read_text())["info"]
    assert info["elapsed"] >= 1.5 and resumed["exit_status"] == "submitted"
    assert resumed["elapsed"] > info["elapsed"]  # the cut step's time is the resumed run's too
