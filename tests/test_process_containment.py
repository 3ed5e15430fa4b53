"""Every process a local run starts ends with it (issue 23 §2), whichever way it is held: bubblewrap (each command its
own PID namespace), the run's PID namespace made with unshare (no bwrap), or this process as a child subreaper (no
namespace at all). A SIGKILL of llm-ide itself: the namespaces go with it, and the next start of the same run reaps
what is left (its processes, its temp folders)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from agent_script import act, reflect, write_script
from conftest import all_gone, make_git_repo, marked, none_marked, require_bwrap, running
from durability_support import finish, llm_ide, wait_for

from llm_ide.environments.holding import namespace_tools

MODES = ["bwrap", "unshare", "subreaper"]
HIDDEN = {"bwrap", "unshare", "nsenter"}  # left out of PATH: no namespace can be made, the subreaper it is


def marker(tmp_path: Path, n: int) -> str:
    """A sleep argument no other test uses."""
    return f"{3000 + os.getpid() % 997}.{abs(hash(tmp_path.name)) % 9973}{n}"


def path_without_namespaces(tmp_path: Path) -> str:
    """A PATH holding every program of this one but bwrap, unshare and nsenter."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for directory in [str(Path(sys.executable).parent), *os.environ["PATH"].split(os.pathsep)]:
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            target = Path(directory) / name
            if name not in HIDDEN and not (folder / name).exists() and os.access(target, os.X_OK):
                (folder / name).symlink_to(target)
    return str(folder)


def require(mode: str) -> None:
    if mode == "bwrap":
        require_bwrap()  # installed and able to make its namespaces here
    if mode == "unshare" and namespace_tools() is None:
        pytest.skip("unshare cannot make a PID namespace here")


def start(tmp_path: Path, mode: str, steps: list[str], cgroup: bool = True) -> tuple[Path, list[str], dict[str, str]]:
    """A run of `steps` in `mode`; without `cgroup`, its commands join no cgroup of the run's (no limit needs one)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n", ".gitignore": "waiting\ngo\n"})
    config = tmp_path / "config.yaml"
    config.write_text(f"environment:\n  tools: []\n  sandbox: {'bwrap' if mode == 'bwrap' else 'none'}\n")
    if not cgroup:
        config.write_text(config.read_text() + "  limits: {processes: null, memory: null}\n")
    model = write_script(tmp_path / "script.yaml", steps)
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--thread-id", "P"]
    args += ["--output", str(tmp_path / "out"), "--config", str(config)]
    env = dict(os.environ)
    if mode == "subreaper":
        env["PATH"] = path_without_namespaces(tmp_path)
    return repo, args, env


def escapes(first: str, second: str) -> str:
    """A detached process (setsid nohup) and a double fork's grandchild, both away from the command's pipe."""
    return f"setsid nohup sleep {first} >/dev/null 2>&1 & ( sleep {second} >/dev/null 2>&1 & ) ; echo started"


@pytest.mark.parametrize("mode", MODES)
def test_setsid_and_double_forks_end_with_the_run(tmp_path: Path, mode: str) -> None:
    require(mode)
    one, two = marker(tmp_path, 1), marker(tmp_path, 2)
    steps = [
        act("Start them.", "bash", command=escapes(one, two)),
        reflect(False, "started"),
        act("Look.", "bash", command=f"ps -o args= -e | grep -c '^sleep {one}$' || true"),
        reflect(False, "looked"),
        act("Done.", "submit"),
    ]
    _, args, env = start(tmp_path, mode, steps)
    code, output = finish(llm_ide(args, tmp_path, env=env))
    assert code == 0, output
    operations = json.loads((tmp_path / "out" / "P.traj.json").read_text())["operations"]
    # with bwrap they end with their command; otherwise they live on until the run ends
    assert operations[1]["observation"].strip() == ("0" if mode == "bwrap" else "1")
    assert all_gone(one) and all_gone(two)
    assert not (tmp_path / "out" / "P.leftovers.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_sigkill_of_llm_ide_leaves_nothing_once_the_run_starts_again(tmp_path: Path, mode: str) -> None:
    """llm-ide (the process alone, not its group) is SIGKILLed while a command runs and two escaped processes live:
    in a namespace they all end with it; as a subreaper they are PID 1's until the next start of the run kills
    them. Either way that start removes the killed run's temp folders, and the run finishes. (In no cgroup: a killed
    run's cgroup and what is in it go at any start of llm-ide, another test's too, before the rerun could say so.)"""
    require(mode)
    one, two, three = marker(tmp_path, 1), marker(tmp_path, 2), marker(tmp_path, 3)
    wait = f"sleep {three} & touch waiting; while [ ! -f go ]; do sleep 0.05; done; echo waited"
    steps = [
        act("Start them.", "bash", command=escapes(one, two)),
        reflect(False, "started"),
        act("Wait.", "bash", command=wait),
        reflect(False, "waited"),
        act("Done.", "submit"),
    ]
    repo, args, env = start(tmp_path, mode, steps, cgroup=False)
    first = llm_ide(args, tmp_path, env=env)
    wait_for(repo / "waiting", first)
    record = json.loads((tmp_path / "out" / "P.leftovers.json").read_text())
    folders = [Path(folder) for folder in record["folders"]]
    assert folders and all(folder.is_dir() for folder in folders)
    assert running(three)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    if mode == "subreaper":
        assert running(one) and running(two) and running(three), "no namespace: they outlive the killed process"
    else:
        assert all_gone(one) and all_gone(two) and all_gone(three)
    (repo / "go").touch()
    code, output = finish(llm_ide(args, tmp_path, env=env))
    assert code == 0, output
    if mode == "subreaper":  # its processes are the run's own to kill; temp folders alone any start may sweep first
        assert "reaped what a killed run left" in output
    assert all_gone(one) and all_gone(two) and all_gone(three)
    assert not any(folder.exists() for folder in folders)
    assert not (tmp_path / "out" / "P.leftovers.json").exists()


def marked_run(tmp_path: Path, mode: str, steps: list[str], config: dict | None = None) -> tuple[Path, list[str], str]:
    """A run whose every process carries a mark of its own (the init of its namespace too)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n", ".gitignore": "waiting\n"})
    mark = uuid.uuid4().hex
    config = config or {}
    environment = {"tools": [], "sandbox": "bwrap" if mode == "bwrap" else "none", "env": {"LLM_IDE_TEST_MARK": mark}}
    settings = {**config, "environment": {**environment, **config.get("environment", {})}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(settings))
    model = write_script(tmp_path / "script.yaml", steps)
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--thread-id", "E"]
    return repo, [*args, "--output", str(tmp_path / "out"), "--config", str(tmp_path / "c.yaml")], mark


HANG = [act("Hang.", "bash", command="sleep 600")]
WAIT = [act("Wait.", "bash", command="touch waiting; sleep 600")]
ENDINGS: dict[str, tuple[dict, list[str], str | None]] = {  # the run's settings, its last steps, its exit status
    "submit": ({}, [act("Done.", "submit")], "submitted"),
    "step limit": ({"agent": {"step_limit": 1}}, [], "step_limit"),
    "wall-time limit": ({"agent": {"wall_time_limit": 3}}, HANG, "time_limit"),
    "a hang cut by its timeout": (
        {"environment": {"command_timeout": 2}},
        [*HANG, reflect(False, "cut"), act("Done.", "submit")],
        "submitted",
    ),
    "an error": ({"agent": {"max_format_errors": 2}}, ["no action", "no action either"], "format_error"),
    "Ctrl-C": ({}, WAIT, "interrupted"),
    "SIGKILL": ({}, WAIT, None),
}


@pytest.mark.slow
@pytest.mark.parametrize("ending", list(ENDINGS))
@pytest.mark.parametrize("mode", ["bwrap", "unshare"])
def test_no_process_of_a_run_outlives_it_however_it_ends(tmp_path: Path, mode: str, ending: str) -> None:
    """Issue 32 §9: whichever way a run ends, nothing it started is left: not its commands, not what they detached
    (setsid, a double fork), not its PID namespace's init (`llm-ide-init`, which SIGTERM does not end)."""
    require(mode)
    config, last, status = ENDINGS[ending]
    escape = act("Start them.", "bash", command=escapes("3600", "3601"))
    repo, args, mark = marked_run(tmp_path, mode, [escape, reflect(False, "started"), *last], config)
    process = llm_ide(args, tmp_path)
    if ending in ("Ctrl-C", "SIGKILL"):
        wait_for(repo / "waiting", process)
        assert marked(mark), "the run's processes live while it runs"
        if ending == "Ctrl-C":
            os.killpg(process.pid, signal.SIGINT)
        else:
            os.kill(process.pid, signal.SIGKILL)
    code, output = finish(process)
    if status is not None:
        assert json.loads((tmp_path / "out" / "E.traj.json").read_text())["info"]["exit_status"] == status, output
    assert none_marked(mark), [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in marked(mark)]


SETPRIV_HELD = """#!/bin/sh
# setpriv, except that the start of the run's sandbox (its namespace's init, or its first marked command) waits for
# the test: llm-ide is killed there, before the death signal of what it started is set
case "$*" in
  *llm-ide-init*|*sleep\\ 3602*)
    if [ -n "$LLM_IDE_RUN_TOKEN" ] && [ ! -e {dir}/go ]; then
      touch {dir}/holding
      while [ ! -e {dir}/go ]; do sleep 0.05; done
    fi;;
esac
exec {setpriv} "$@"
"""


@pytest.mark.parametrize("mode", ["bwrap", "unshare"])
def test_a_run_killed_as_its_sandbox_starts_leaves_nothing(tmp_path: Path, mode: str) -> None:
    """Issue 32 §9: the inits left behind came from a llm-ide killed as a sandbox started, before the death signal of
    the process it started was set (setpriv sets it after the fork): that signal never came. Here llm-ide is SIGKILLed
    right there (setpriv is held at that moment); then the init ends on its own (its stdin, a pipe only llm-ide held,
    is closed), and a command whose parent is already gone does not start."""
    require(mode)
    steps = [act("Sleep.", "bash", command="sleep 3602"), reflect(False, "slept"), act("Done.", "submit")]
    repo, args, mark = marked_run(tmp_path, mode, steps)
    held = tmp_path / "held"
    held.mkdir()
    (held / "setpriv").write_text(SETPRIV_HELD.format(dir=held, setpriv=shutil.which("setpriv")))
    (held / "setpriv").chmod(0o755)
    env = {**os.environ, "PATH": f"{held}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    process = llm_ide(args, tmp_path, env=env)
    wait_for(held / "holding", process)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    (held / "go").touch()
    assert none_marked(mark), [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in marked(mark)]
