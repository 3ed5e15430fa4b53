"""A local environment that fails or is interrupted as it starts leaves nothing behind: neither its cgroup nor a temp
folder (the next start would sweep them, but a failed start cleans up after itself), and its error is one line."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from agent_script import act, write_script
from conftest import make_git_repo, require_bwrap

from llm_ide.config import load_config
from llm_ide.environments import LocalEnvironment
from llm_ide.environments.cgroups import controller_dirs
from llm_ide.environments.limits import Limits
from llm_ide.environments.sandbox import Sandbox
from llm_ide.environments.scratch import OWNED
from llm_ide.errors import EnvironmentFailure, UsageError
from llm_ide.workspace.lifecycle import open_environment


def made_by(pid: int, temp: Path) -> list[str]:
    """The temp folders in `temp` and the cgroups that process `pid` made."""
    places = [temp, *{parent for parent in controller_dirs().values() if os.access(parent, os.W_OK)}]
    return [
        str(entry)
        for place in places
        for entry in place.iterdir()
        if (m := OWNED.match(entry.name)) and int(m["pid"]) == pid
    ]


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_a_start_that_fails_after_its_cgroup_is_made_removes_what_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    """The output folder refused as the repository itself, once the confinement (the run's cgroup) and the folders
    are made: they go, and the error is the one line the user gets."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    before = made_by(os.getpid(), temp)  # (what this process's earlier environments hold)
    with pytest.raises(UsageError, match="the output folder is the repository itself") as raised:
        LocalEnvironment(repo, sandbox=sandbox, secluded=[repo], limits=Limits(processes=512, memory=1 << 30))
    assert "\n" not in str(raised.value)
    assert made_by(os.getpid(), temp) == before


@pytest.mark.parametrize(
    "where",
    ["under a file", pytest.param("in a locked folder", marks=pytest.mark.skipif(os.getuid() == 0, reason="root"))],
)
def test_a_tools_folder_that_cannot_be_made_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str):
    """A `tools_dir` whose folder cannot be made (under a file; as a plain user, in a folder of mode 0) raised mkdir's
    NotADirectoryError or PermissionError: now an EnvironmentFailure in one line, what the start made removed."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (temp := tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    (tmp_path / "file").write_text("")
    (locked := tmp_path / "locked").mkdir(mode=0)
    tools = (tmp_path / "file" if where == "under a file" else locked) / "tools"
    before = made_by(os.getpid(), temp)
    with pytest.raises(EnvironmentFailure, match=f"the tools folder {tools} cannot be made: ") as raised:
        LocalEnvironment(repo, sandbox="none", tools_dir=tools)
    assert "\n" not in str(raised.value)
    assert made_by(os.getpid(), temp) == before


@pytest.mark.parametrize(
    "change",
    ["replaced by a file", pytest.param("read-only", marks=pytest.mark.skipif(os.getuid() == 0, reason="root"))],
)
def test_a_closing_environment_whose_record_folder_changed_still_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """The run's folder replaced by a file (or made read-only) under the run: removing its leftovers record raised
    NotADirectoryError (PermissionError) from close(), which hid the error that had ended the run. The record is
    left, the temp folders still go."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (temp := tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    (out := tmp_path / "out").mkdir()
    before = made_by(os.getpid(), temp)
    env = LocalEnvironment(repo, sandbox="none", leftovers=out / "g.leftovers.json")
    if change == "read-only":
        out.chmod(0o500)
    else:
        shutil.rmtree(out)
        out.write_text("")
    env.close()
    assert made_by(os.getpid(), temp) == before


def interrupted_run(tmp_path: Path, repo: Path, environ: dict[str, str]) -> tuple[int, str, Path]:
    """`llm-ide run` on `repo` with `environ` added (where something sends it SIGTERM): its PID, output and temp
    directory, once it ended (interrupted, in one line)."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    model = write_script(tmp_path / "s.yaml", [act("Done.", "submit")])
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--output", str(tmp_path / "out")]
    environ = {**os.environ, "TMPDIR": str(temp), "LLM_IDE_TOOLS_CACHE": "off", **environ}
    process = subprocess.Popen(
        [sys.executable, "-m", "llm_ide", *args, "--config", str(tmp_path / "c.yaml")],
        cwd=tmp_path,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # (what sends the signal finds it as its process group; goes with it)
    )
    try:
        output, _ = process.communicate(timeout=300)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        raise
    assert process.returncode != 0 and "interrupted" in output and "Traceback" not in output, output
    return process.pid, output, temp


def test_a_run_interrupted_as_its_environment_starts_removes_what_it_made(tmp_path: Path) -> None:
    """SIGTERM while the start asks the repository's Python what it is (a virtualenv's python3 that sends it and waits
    to be killed): the run ends interrupted, in one line, and its cgroup and temp folders are gone."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    venv, probe = tmp_path / "venv", tmp_path / "probe"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python3").write_text(f"#!/bin/sh\necho $$ > {probe}\nkill -TERM $PPID\nexec sleep 600\n")
    (venv / "bin" / "python3").chmod(0o755)
    pid, output, temp = interrupted_run(tmp_path, repo, {"VIRTUAL_ENV": str(venv)})
    assert made_by(pid, temp) == [], output
    assert ends_soon(int(probe.read_text())), "the probe outlived the run"  # (the signal may land as it starts)


def test_a_run_interrupted_as_it_reports_its_baseline_closes_its_environment(tmp_path: Path) -> None:
    """SIGTERM once the environment is made, while the run asks git what its baseline holds (a `git` that sends it to
    the run, then waits to be killed): the environment is closed (its cgroup, temp folders and leftovers record gone),
    not left to the interpreter's exit or the next start."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    fake = tmp_path / "bin" / "git"
    fake.parent.mkdir()
    status = 'if [ "$1" = status ]; then kill -TERM "$(ps -o pgid= -p $$ | tr -d " ")"; exec sleep 600; fi'
    fake.write_text(f'#!/bin/sh\n{status}\nexec {shutil.which("git")} "$@"\n')
    fake.chmod(0o755)
    pid, output, temp = interrupted_run(tmp_path, repo, {"PATH": f"{fake.parent}:{os.environ['PATH']}"})
    assert made_by(pid, temp) == [], output
    assert list((tmp_path / "out").glob("*.leftovers.json")) == [], output


def test_an_interruption_as_the_start_says_its_notes_closes_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the start tells its notes (the progress callback interrupted at the first): the environment is
    closed (its cgroup, temp folders and leftovers record gone), as for any failure later in the start."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    temp, out = tmp_path / "tmp", tmp_path / "out"
    temp.mkdir()
    out.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    before = made_by(os.getpid(), temp)
    settings = load_config("default", environment={"tools": []})

    def interrupted(note: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        open_environment(settings, repo, "r1", None, out, None, None, interrupted)
    assert made_by(os.getpid(), temp) == before
    assert list(out.glob("*.leftovers.json")) == []


def test_a_python_probe_interrupted_leaves_nothing_it_started_running(tmp_path: Path) -> None:
    """The start's probe of a Python that starts a process of its own (a shim running the real interpreter), when the
    run is interrupted meanwhile: that process ends with the probe, not left running after the run."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    venv, started = tmp_path / "venv", tmp_path / "started"
    (venv / "bin").mkdir(parents=True)
    in_communicate = "until grep -q poll /proc/$PPID/wchan; do :; done"  # (not while llm-ide is in Popen() still)
    (venv / "bin" / "python3").write_text(
        f"#!/bin/sh\nsleep 600 &\necho $! > {started}\n{in_communicate}\nkill -TERM $PPID\nwait\n"
    )
    (venv / "bin" / "python3").chmod(0o755)
    interrupted_run(tmp_path, repo, {"VIRTUAL_ENV": str(venv)})
    assert ends_soon(int(started.read_text())), "the probe's own process outlived the run"


def ends_soon(pid: int) -> bool:
    """Whether process `pid` is gone or ends within 30 s (else it is killed)."""
    try:
        descriptor = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        if select.select([descriptor], [], [], 30)[0]:  # (readable once it has exited)
            return True
        os.kill(pid, signal.SIGKILL)
        return False
    finally:
        os.close(descriptor)


def refused(output: str) -> None:
    raise KeyboardInterrupt


def descriptors() -> set[tuple[str, str]]:
    """This process's open descriptors with what each points to (a pipe's inode included): another test's object the
    collector closes meanwhile drops out, a new pipe on a reused number still shows."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # the listing's own descriptor
            found.add((fd, os.readlink(f"/proc/self/fd/{fd}")))
    return found


@pytest.mark.parametrize(
    ("cwd", "on_output", "error"),
    [("gone", None, FileNotFoundError), (None, refused, KeyboardInterrupt)],
    ids=["not-started", "interrupted"],
)
def test_a_sandboxed_command_not_started_or_interrupted_leaves_no_descriptor_open(
    tmp_path: Path, cwd: str | None, on_output: object, error: type[BaseException]
) -> None:
    """A command whose process cannot start (its folder gone) or that is interrupted as it runs (Ctrl-C at its first
    output): the pipe that tells whether its sandbox started it is closed all the same, at every try."""
    require_bwrap()
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    with LocalEnvironment(repo, sandbox="bwrap") as env:
        env.execute("true")
        before = descriptors()
        for _ in range(3):
            with pytest.raises(error):
                env.execute("echo out", cwd=cwd, on_output=on_output)  # type: ignore[arg-type]
        assert descriptors() - before == set()


def test_a_sandbox_is_complete_when_built(tmp_path: Path) -> None:
    """A command's Sandbox is built whole (its views, masked sockets, home and user at once) and never changed."""
    home, shown = str(tmp_path / "home"), str(tmp_path)
    sandbox = Sandbox(("bwrap",), [tmp_path], hidden=[Path(home)], homes={Path(home): tmp_path}, inner=["setpriv"])
    assert sandbox.argv(["true"], tmp_path) == [
        *("bwrap", "--bind", shown, shown, "--bind", shown, home, "--chdir", shown, "setpriv", "true")
    ]
    with pytest.raises(dataclasses.FrozenInstanceError):
        sandbox.sockets = ["/run/x.sock"]  # type: ignore[misc]
