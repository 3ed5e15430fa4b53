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
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import make_git_repo
from test_durability import finish, llm_ide, wait_for
from test_local_env import all_gone, running

from llm_ide.environments.processes import namespace_tools

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
    if mode == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    if mode == "unshare" and namespace_tools() is None:
        pytest.skip("unshare cannot make a PID namespace here")


def start(tmp_path: Path, mode: str, steps: list[str]) -> tuple[Path, list[str], dict[str, str]]:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n", ".gitignore": "waiting\ngo\n"})
    config = tmp_path / "config.yaml"
    config.write_text(f"environment:\n  tools: []\n  sandbox: {'bwrap' if mode == 'bwrap' else 'none'}\n")
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
    them. Either way that start removes the killed run's temp folders, and the run finishes."""
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
    repo, args, env = start(tmp_path, mode, steps)
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
    assert "reaped what a killed run left" in output
    assert all_gone(one) and all_gone(two) and all_gone(three)
    assert not any(folder.exists() for folder in folders)
    assert not (tmp_path / "out" / "P.leftovers.json").exists()
