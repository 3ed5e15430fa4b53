"""Someone else's text run by llm-ide (issue 32): a trajectory to replay, a config, a dataset row, a run's commands.
Replaying a stranger's commands without a sandbox is refused unless asked for; with bubblewrap the user's home is
empty to the commands (run, replay and reproduction scripts alike); every number and pattern
read from a file is bounded (one line, exit 2, never a hang); the wall-time limit cuts a running command."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import make_git_repo, require_bwrap
from in_process import invoke
from replay_support import INSTANCE, make_repo, mini_trajectory

from llm_ide.swebench.dataset import Instance, RowError, parse_row

PATH = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"


def llm_ide(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return invoke(*args, cwd=cwd, env={**os.environ, "COLUMNS": "200", "PATH": PATH, **(env or {})})


def one_line_error(done: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert all(part in done.stderr for part in parts), done.stderr


def path_without_bwrap(tmp_path: Path) -> str:
    """Every program of PATH but bwrap."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for directory in PATH.split(os.pathsep):
        for program in Path(directory).iterdir() if Path(directory).is_dir() else []:
            target = folder / program.name
            if program.name != "bwrap" and not target.exists() and os.access(program, os.X_OK):
                target.symlink_to(program)
    return str(folder)


@pytest.mark.parametrize("how", ["bwrap missing", "sandbox none"])
def test_a_strangers_trajectory_is_not_replayed_unsandboxed_unless_asked(tmp_path: Path, how: str) -> None:
    """Issue 32 §3: without bubblewrap a trajectory's commands ran as the user (wrote to $HOME, /tmp, the source
    repository) after one warning, exit 0. Now one line naming --unsandboxed, nothing run or written."""
    repo = make_repo(tmp_path / "repo")
    marks = [tmp_path / "home-mark", tmp_path / "tmp-mark", repo / "source-mark"]
    command = "; ".join(f"touch {mark}" for mark in marks)
    trajectory = mini_trajectory(tmp_path / f"{INSTANCE}.traj.json", [("Write.", command, 0, "")])
    env = {"PATH": path_without_bwrap(tmp_path)} if how == "bwrap missing" else {}
    (tmp_path / "c.yaml").write_text(f"environment: {{sandbox: {'none' if how == 'sandbox none' else 'bwrap'}}}\n")
    args = ["replay", str(trajectory), "--repo", str(repo), "--out", str(tmp_path / "out"), "--config", "c.yaml"]
    refused = llm_ide(*args, cwd=tmp_path, env=env)
    reason = "bubblewrap (bwrap) is not installed" if how == "bwrap missing" else "environment.sandbox is none"
    one_line_error(refused, reason, "would run on this machine as you", "pass --unsandboxed to replay it anyway")
    assert not any(mark.exists() for mark in marks) and not (tmp_path / "out").exists()
    asked = llm_ide(*args, "--unsandboxed", cwd=tmp_path, env=env)
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert (tmp_path / "home-mark").exists()  # asked for: the commands ran as the user


def test_the_sandbox_shows_no_file_of_the_users_home(tmp_path: Path) -> None:
    """Issue 32 §4: with bubblewrap `cat ~/.private-file` put the file into the observation, the trajectory and the
    prompts. Now the home directory is empty to the commands of a run and of its reproduction script, ssh-agent's
    socket folders too, but for what `environment.readable` lists, and the repository and the output, which live
    under $HOME here."""
    require_bwrap()
    home = tmp_path / "home"
    secret = "Kq7dJ2vW9xL4mP8s-home-secret"
    (home / ".ssh").mkdir(parents=True)
    for name in (".private-file", ".ssh/id_ed25519"):
        (home / name).write_text(f"{secret}\n")
        (home / name).chmod(0o600)
    agent = Path(tempfile.mkdtemp(prefix="ssh-"))  # where ssh-agent puts its socket
    (agent / "agent.1234").write_text(f"{secret}\n")
    (home / "toolchain" / "bin").mkdir(parents=True)
    (home / "toolchain" / "bin" / "tool").write_text("toolchain-ok\n")
    repo = make_git_repo(home / "work" / "repo", {"a.py": "x = 1\n"})
    probe = f"cat ~/.private-file ~/.ssh/id_ed25519 {agent}/agent.1234; cat ~/toolchain/bin/tool; ls; echo $HOME"
    steps = [act("Look.", "bash", command=probe), reflect(False, "ok"), act("Done.", "submit")]
    model = write_script(tmp_path / "s.yaml", steps)
    (tmp_path / "reproduce.sh").write_text(f"cat ~/.private-file {agent}/agent.1234; echo reproduced\n")
    config = tmp_path / "c.yaml"
    config.write_text("environment: {tools: [], readable: [~/toolchain]}\n")
    out = home / "runs"
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", str(config), "--output", str(out)]
    args += ["--thread-id", "s", "--reproduction", str(tmp_path / "reproduce.sh")]
    try:
        done = llm_ide(*args, cwd=tmp_path, env={"HOME": str(home), "LLM_IDE_CONFIG": "off"})
    finally:
        shutil.rmtree(agent)
    assert done.returncode == 0, done.stdout + done.stderr
    trajectory = json.loads((out / "s.traj.json").read_text())
    observation = trajectory["operations"][0]["observation"]
    assert "No such file or directory" in observation and "toolchain-ok" in observation and "a.py" in observation
    reproduction = json.dumps(trajectory["info"]["reproduction"])
    assert "reproduced" in reproduction
    calls = gzip.decompress((out / "s.calls.jsonl.gz").read_bytes()).decode()
    everything = [observation, reproduction, calls, (out / "s.log").read_text(), done.stdout]
    assert not any(secret in text for text in everything)


@pytest.mark.parametrize(
    ("config", "content", "said"),
    [
        ({"agent": {"action_regex": "("}}, "", "its action_regex '(': not a valid regular expression"),
        ({"agent": {"action_regex": r"(\w+\s?)+$"}}, "a" * 20_000 + "!", "matching took over 2 s"),
        ({"agent": {"action_regex": "(a+)+b"}}, "a" * 64, "the trajectory has no action to replay"),
        ({"environment": {"timeout": 1e12}}, "", "its command timeout 1000000000000.0 is not a number"),
        ({"environment": {"timeout": "nan"}}, "", "its command timeout nan is not a number of seconds"),
        ({"environment": {"cwd": "../../home"}}, "", "its working directory '../../home' is not an absolute path"),
    ],
)
def test_a_trajectory_is_read_with_bounds(tmp_path: Path, config: dict, content: str, said: str) -> None:
    """Issue 32 §5: an invalid `action_regex` gave a 60-line traceback, `(a+)+b` hung the replay (Ctrl-C did not stop
    it), a command timeout of 1e12 was taken as is. Now each is one line, exit 2, in bounded time, nothing written."""
    repo = make_repo(tmp_path / "repo")
    trajectory = mini_trajectory(tmp_path / f"{INSTANCE}.traj.json", [("Look.", "ls", 0, "m.py\n")])
    data = json.loads(trajectory.read_text())
    data["info"]["config"] = {**data["info"]["config"], **config}
    if content:
        data["messages"][2]["content"] = content
    trajectory.write_text(json.dumps(data))
    done = llm_ide("replay", str(trajectory), "--repo", str(repo), "--out", str(tmp_path / "out"), cwd=tmp_path)
    one_line_error(done, f"{trajectory}: ", said)
    assert not (tmp_path / "out").exists()


def test_the_wall_time_limit_cuts_a_running_command(tmp_path: Path) -> None:
    """Issue 32 §5: `sleep 60` ran 60.1 s under a 10 s wall-time limit. Now the command is cut when the limit passes
    (its timeout is the time left) and the run ends `time_limit`."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    steps = [act("Wait.", "bash", command="sleep 60; echo slept"), reflect(False, "ok"), act("Done.", "submit")]
    model = write_script(tmp_path / "s.yaml", steps)
    (tmp_path / "c.yaml").write_text("agent: {wall_time_limit: 1}\nenvironment: {tools: []}\n")
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", "c.yaml", "--thread-id", "w"]
    done = llm_ide(*args, "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 1 and "time_limit after 1 model call" in done.stdout, done.stdout + done.stderr
    said = [
        line for line in done.stderr.splitlines() if line.startswith("the run's wall-time limit (1 s) is reached (")
    ]
    assert len(said) == 1, done.stderr  # (after the warning of a machine without bubblewrap)
    (operation,) = json.loads((tmp_path / "out" / "w.traj.json").read_text())["operations"]
    assert "slept" not in operation["observation"] and "[command timed out after" in operation["observation"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("environment:\n  command_timeout: 1.0e12\n", "environment.command_timeout: input should be less than or"),
        ("environment:\n  command_timeout: .inf\n", "environment.command_timeout: input should be a finite number"),
        ("model:\n  timeout: .nan\n", "model.timeout: input should be a finite number"),
        ("agent:\n  wall_time_limit: 1.0e9\n", "agent.wall_time_limit: input should be less than or equal to 604800"),
    ],
)
def test_numbers_of_a_config_are_bounded(tmp_path: Path, text: str, said: str) -> None:
    (tmp_path / "c.yaml").write_text(text)
    one_line_error(llm_ide("config", "show", "--config", "c.yaml", cwd=tmp_path), said)


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A billion laughs: each level a list of `width` aliases of the one before (9^9 values from ~0.5 KB)."""
    lines = ["  a0: &a0 [" + ", ".join(['"lol"'] * width) + "]"]
    lines += [f"  a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * width) + "]" for n in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("where", "command"),
    [
        ("config", ["config", "show", "--config", "bomb.yaml"]),
        ("statuses", ["report", "batch"]),
        ("script", ["run", "--repo", "repo", "--task", "t", "--model", "scripted:bomb.yaml"]),
    ],
)
def test_a_yaml_alias_bomb_is_one_line(tmp_path: Path, where: str, command: list[str]) -> None:
    """Issue 32 §7: 1.2 KB of aliases under model.kwargs drove `config show` to 3.7 GB and no answer in 120 s. Every
    YAML file read from outside (configs, a batch's exit_statuses.yaml, a scripted model) is refused in one line."""
    make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (tmp_path / "batch").mkdir()
    bomb = {
        "config": "model:\n  kwargs:\n" + alias_bomb(),
        "statuses": "instances:\n" + alias_bomb(),
        "script": "responses:\n" + alias_bomb(),
    }[where]
    (tmp_path / ("batch/exit_statuses.yaml" if where == "statuses" else "bomb.yaml")).write_text(bomb)
    done = llm_ide(*command, cwd=tmp_path, env={"LLM_IDE_CONFIG": "off"})
    one_line_error(done, "its aliases expand to more than 100,000 values")


@pytest.mark.parametrize(
    ("where", "command"),
    [
        ("config", ["config", "show", "--config", "bad.yaml"]),
        ("statuses", ["report", "batch"]),
        ("script", ["run", "--repo", "repo", "--task", "t", "--model", "scripted:bad.yaml"]),
        ("tool", ["run", "--repo", "repo", "--task", "t", "--model", "scripted:bad.yaml", "--config", "c.yaml"]),
    ],
)
@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("!!int x", "invalid literal for int() with base 10: 'x'"),
        ("!!timestamp 2020-13-45", "month must be in 1..12"),
        ("!!int " + "9" * 5000, "Exceeds the limit (4300 digits)"),
    ],
    ids=["int", "timestamp", "digits"],
)
def test_a_value_its_tag_cannot_make_is_one_line(
    tmp_path: Path, where: str, command: list[str], value: str, said: str
) -> None:
    """A tag the safe loader knows over a value it cannot make raised Python's own error out of every YAML reader:
    a traceback, where any other mistake in the file is one line naming it."""
    make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (tmp_path / "batch").mkdir()
    text = {
        "config": f"model:\n  timeout: {value}\n",
        "statuses": f"instances:\n  a: {value}\n",
        "script": f"responses:\n  - {value}\n",
        "tool": f"tool_name: t\ndescription: {value}\n",
    }[where]
    (tmp_path / ("batch/exit_statuses.yaml" if where == "statuses" else "bad.yaml")).write_text(text)
    if where == "tool":
        (tmp_path / "c.yaml").write_text(f"environment:\n  tools: [{tmp_path / 'bad.yaml'}]\n")
    done = llm_ide(*command, cwd=tmp_path, env={"LLM_IDE_CONFIG": "off"})
    one_line_error(done, said)


@pytest.mark.parametrize("instance_id", ["../x", "/tmp/x", "a/b", "..", "tab\there", "x" * 201])
def test_a_dataset_rows_instance_id_must_name_a_folder(instance_id: str) -> None:
    """A batch writes each instance's run into `<output>/<instance id>/`: an id that is a path is a row error."""
    found = parse_row({"instance_id": instance_id, "problem_statement": "p"}, 3)
    assert isinstance(found, RowError) and (found.row, found.field) == (3, "instance_id")
    assert isinstance(parse_row({"instance_id": "django__django-11099", "problem_statement": "p"}, 0), Instance)
