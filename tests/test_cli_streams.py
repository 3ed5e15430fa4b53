"""The command line's standard input and output: a config or task read from a pipe or standard input (saved, read
once, named so by the command that goes on), standard input closed, an output pipe closed or a full disk (one line or
SIGPIPE's exit), `inspect` piped (not cropped). Child processes where the stream must be a real file or pipe."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import threading
from pathlib import Path

import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, act, reflect, write_script
from cli_support import CLI, llm_ide, no_tools
from conftest import make_git_repo
from in_process import invoke

from llm_ide.config import load_config
from llm_ide.run.single import run_task


@pytest.mark.parametrize("given", ["-c", "--config="])
def test_a_config_read_from_a_pipe_is_saved_and_the_command_that_goes_on_names_the_copy(
    tmp_path: Path, given: str
) -> None:
    """`-c <(…)`: the command printed named /dev/fd/63, gone once read ("config file not found" when pasted); the
    config is saved beside the run's outputs as it is read, and the command names that file."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    script = [act("One.", "bash", command="echo one >> trail.txt"), reflect(False, "one"), act("Done.", "submit")]
    config = json.dumps({"environment": {"tools": [], "pull": "never"}})
    os.mkfifo(pipe := tmp_path / "pipe")
    threading.Thread(target=pipe.write_text, args=(config,), daemon=True).start()  # a writer, as `<(…)` is
    option = ["-c", str(pipe)] if given == "-c" else [f"--config={pipe}"]
    args = ["run", "-t", "trail", "-m", write_script(tmp_path / "s.yaml", script), "-o", "out", "--repo", str(repo)]
    first = invoke(*args, *option, "--thread-id", "T", "--step-limit", "1", cwd=tmp_path)
    assert first.returncode == 1 and "step_limit" in first.stdout, first.stdout + first.stderr
    copy = ["-c", "out/T.config.yaml"] if given == "-c" else ["--config=out/T.config.yaml"]
    again = shlex.split(first.stderr.splitlines()[-1])
    assert again == ["llm-ide", *args, *copy, "--thread-id", "T", "--step-limit", "2"]
    assert (tmp_path / "out" / "T.config.yaml").read_text() == config
    went_on = invoke(*again[1:], cwd=tmp_path)
    assert went_on.returncode == 0 and "had stopped at a limit" in went_on.stdout, went_on.stdout + went_on.stderr
    assert (repo / "trail.txt").read_text() == "one\n"
    assert json.loads((tmp_path / "out" / "T.traj.json").read_text())["info"]["config"]["environment"]["tools"] == []


@pytest.mark.parametrize("name", ["/dev/stdin", "/dev/fd/0"])
def test_a_task_file_naming_standard_input_is_read_as_dash_is(tmp_path: Path, name: str) -> None:
    """`--task-file /dev/stdin < task.txt`: standard input a file, it was taken for one, and the command that goes on
    named /dev/stdin (pasted, it read the terminal without a word, or found the task empty)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    script = [act("One.", "bash", command="echo one >> trail.txt"), reflect(False, "one"), act("Done.", "submit")]
    (task := tmp_path / "task.txt").write_text("write the trail\n")
    args = ["run", "-m", write_script(tmp_path / "s.yaml", script), "-c", str(no_tools(tmp_path)), "-o", "out"]
    args += ["--repo", str(repo), "--thread-id", "T"]
    with task.open() as stdin:
        first = subprocess.run(
            [*CLI, *args, "--task-file", name, "--step-limit", "1"], cwd=tmp_path, stdin=stdin, capture_output=True
        )
    stderr = first.stderr.decode()
    assert first.returncode == 1 and "step_limit" in first.stdout.decode(), stderr
    again = shlex.split(stderr.splitlines()[-1])
    assert again == ["llm-ide", *args, "--step-limit", "2"]  # the task left out: the thread holds it
    went_on = invoke(*again[1:], cwd=tmp_path)
    assert went_on.returncode == 0 and "had stopped at a limit" in went_on.stdout, went_on.stdout + went_on.stderr
    assert json.loads((tmp_path / "out" / "T.traj.json").read_text())["task"] == "write the trail\n"


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_a_config_read_from_standard_input_is_saved_and_read_once(tmp_path: Path, name: str) -> None:
    """`-c - < config.yaml`: a file named `-` was read ("cannot read it or save it"); it is standard input, saved as
    `-c <(…)` is and named so by the command that goes on. With the task read from it too: one line, exit 2 (the
    second reader found it empty)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    script = [act("One.", "bash", command="echo one >> trail.txt"), reflect(False, "one"), act("Done.", "submit")]
    config = json.dumps({"environment": {"tools": [], "pull": "never"}, "agent": {"step_limit": 1}})
    args = ["run", "-t", "trail", "-m", write_script(tmp_path / "s.yaml", script), "-o", "out", "--repo", str(repo)]
    first = invoke(*args, "-c", name, "--thread-id", "T", cwd=tmp_path, input=config)
    assert first.returncode == 1 and "step_limit" in first.stdout, first.stdout + first.stderr
    again = shlex.split(first.stderr.splitlines()[-1])
    assert again == ["llm-ide", *args, "-c", "out/T.config.yaml", "--thread-id", "T", "--step-limit", "2"]
    assert (tmp_path / "out" / "T.config.yaml").read_text() == config
    went_on = invoke(*again[1:], cwd=tmp_path)
    assert went_on.returncode == 0 and (repo / "trail.txt").read_text() == "one\n", went_on.stdout + went_on.stderr
    both = invoke(*args[:1], *args[3:], "--task-file", "-", "-c", name, "--thread-id", "U", cwd=tmp_path, input="x")
    said = f"error: --task-file - and --config {name} both read standard input, which is read once: give one of them"
    assert both.returncode == 2 and both.stderr.startswith(said) and both.stderr.count("\n") == 1, both.stderr


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_a_task_file_naming_standard_input_when_it_is_closed_is_one_line(tmp_path: Path, name: str) -> None:
    """`<&-`: an AttributeError's traceback (`/dev/stdin` was a line before it was read as standard input)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    args = ["run", "--repo", str(repo), "--task-file", name, "-m", write_script(tmp_path / "s.yaml", ["submit"])]
    closed = subprocess.run(["sh", "-c", 'exec "$@" <&-', "sh", *CLI, *args], cwd=tmp_path, capture_output=True)
    assert (closed.returncode, closed.stderr.decode()) == (2, f"error: --task-file {name}: standard input is closed\n")


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["config", "show"], ["tools", "list"]])
def test_a_command_whose_output_pipe_is_closed_ends_quietly_as_sigpipe(tmp_path: Path, args: list[str]) -> None:
    """`llm-ide config show | head -1`: the write that found the pipe closed ended the command as typer ends one on
    Ctrl-C (exit 130, what a script takes for the user's Ctrl-C); it exits 141 as SIGPIPE's (as a run does), with
    nothing on stderr. A child process, its stdout a pipe whose reader is gone before it writes."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run([*CLI, *args], cwd=tmp_path, stdout=writer, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(writer)
    assert (done.returncode, done.stderr) == (141, "")


@pytest.mark.parametrize(
    "args", [["--help"], ["config", "show"], ["--version"], ["tools", "list"], ["graph", "--mermaid"]]
)
def test_a_command_whose_output_cannot_be_written_says_so_in_one_line(tmp_path: Path, args: list[str]) -> None:
    """`llm-ide config show > /dev/full` (a full disk) ended in a traceback; it is one line, exit 1. `--version`,
    `tools list` and `graph` exited 0 in silence: the failed write was a probe of click's, which swallows errors."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([*CLI, *args], cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True)
    assert (done.returncode, done.stderr) == (1, "error: cannot write the command's output: No space left on device\n")


def test_inspect_piped_is_not_cropped_and_full_shows_the_whole_story(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    result = run_task(
        "Cart.total ignores quantities.",
        model=write_script(tmp_path / "fix.yaml", FIX_SCRIPT),
        settings=load_config("default", environment={"tools": []}),
        output_dir=tmp_path / "out",
        run_id="fix",
        repo=repo,
    )
    traj = json.loads(result.trajectory_path.read_text())
    edit = next(op for op in traj["operations"] if op["action_type"] == "edit")
    params = json.dumps(edit["action_params"], ensure_ascii=False)
    assert len(params) > 100
    plain = llm_ide("inspect", str(result.trajectory_path), cwd=tmp_path)
    assert plain.returncode == 0 and params in plain.stdout and "…" not in plain.stdout
    full = llm_ide("inspect", "--full", str(result.trajectory_path), cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    shown = " ".join(full.stdout.split())  # tabs are expanded; lines carry the tree's guides
    for op in traj["operations"]:
        for text in (op["thought"], op["summary"], *op["lessons"].splitlines(), *op["observation"].splitlines()):
            assert " ".join(text.split()) in shown
    assert "11.5 != 16.0" in full.stdout  # a failing test run's observation
    assert "patch:" in full.stdout and result.submission.rstrip("\n") in full.stdout
