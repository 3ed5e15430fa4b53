"""`invoke` (tests/in_process.py) says what a child process says: the same command lines run both ways give the same
exit code, stdout and stderr, and the test's process is left as it was (environment, directory, argv, streams,
signal handlers, logging)."""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, act, write_script
from conftest import make_git_repo
from in_process import invoke, said_once

from llm_ide.errors import warn_once


def child(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from llm_ide.cli import app; app()", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def untimed(output: str) -> str:
    """The output without the seconds the project's own tests took (unittest's `Ran 1 test in 0.004s`, which a
    step's preview shows)."""
    return re.sub(r"(Ran \d+ tests? in )\d+\.\d+s", r"\1…s", output)


def command_lines(folder: Path) -> dict[str, list[str]]:
    """Command lines run in `folder`, every path in them relative to it."""
    make_git_repo(folder / "repo", BUGGY_FILES)
    (folder / "no-tools.yaml").write_text(json.dumps({"environment": {"tools": []}}))
    (folder / "bad.yaml").write_text("agent: {step_limt: 3}\n")
    write_script(folder / "fix.yaml", FIX_SCRIPT)
    write_script(folder / "stop.yaml", [act("Look.", "bash", command="ls")])
    run = ["run", "--repo", "repo", "--task", "Cart.total ignores quantities.", "--config", "no-tools.yaml"]
    return {
        "version": ["--version"],
        "help": ["run", "--help"],
        "unknown option": ["run", "--nope"],
        "bad value": ["run", "--repo", "repo", "--task", "t", "--model", "scripted:fix.yaml", "--step-limit", "-1"],
        "no model": ["run", "--repo", "repo", "--task", "t"],
        "bad config": [*run, "--model", "scripted:fix.yaml", "--config", "bad.yaml"],
        "submitted": [*run, "--model", "scripted:fix.yaml", "--thread-id", "fixed", "--output", "out"],
        "script ends": [*run, "--model", "scripted:stop.yaml", "--thread-id", "stopped", "--output", "out2"],
        "inspect": ["inspect", "out/fixed.traj.json"],
        "inspect missing": ["inspect", "nowhere.traj.json"],
        "config show": ["config", "show", "agent.step_limit"],
    }


def test_a_command_line_in_process_says_what_it_says_as_a_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):  # the two repositories' commits: one hash
        monkeypatch.setenv(variable, "2024-01-01T00:00:00Z")
    env = {**os.environ, "COLUMNS": "123", "LLM_IDE_CONFIG": "off"}
    ours, theirs = tmp_path / "ours", tmp_path / "kids"  # one length: the prompts are as long
    lines = command_lines(ours)
    assert command_lines(theirs) == lines
    codes = set()
    for name, args in lines.items():  # in order: `inspect` reads the run before it
        said, told = invoke(*args, cwd=ours, env=env), child(*args, cwd=theirs, env=env)
        expected = [
            told.returncode,
            *(untimed(text.replace(str(theirs), str(ours))) for text in (told.stdout, told.stderr)),
        ]
        got = [said.returncode, untimed(said.stdout), untimed(said.stderr)]
        diff = "\n".join(difflib.unified_diff(expected[1].splitlines(), got[1].splitlines(), lineterm=""))
        assert [name, *got] == [name, *expected], diff
        codes.add(said.returncode)
    assert codes == {0, 1, 2}
    assert (ours / "out" / "fixed.patch").read_text() == (theirs / "out" / "fixed.patch").read_text() != ""


def test_the_process_is_left_as_it_was(tmp_path: Path) -> None:
    before = (dict(os.environ), os.getcwd(), sys.argv[:], sys.stdout, sys.stderr, sys.stdin)
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    root = logging.getLogger()
    logging_before = (root.handlers[:], root.level, logging.getLogger("llm_ide").level)
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    model = write_script(tmp_path / "s.yaml", [act("Done.", "submit")])
    (tmp_path / "c.yaml").write_text(json.dumps({"environment": {"tools": []}}))
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), "LLM_IDE_CONFIG": "off", "ONLY": "me"}
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", "c.yaml"]
    done = invoke(*args, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "submitted after 1 model call" in done.stdout
    assert (dict(os.environ), os.getcwd(), sys.argv, sys.stdout, sys.stderr, sys.stdin) == before
    assert {signum: signal.getsignal(signum) for signum in handlers} == handlers
    assert (root.handlers, root.level, logging.getLogger("llm_ide").level) == logging_before


def test_the_command_sees_the_calls_environment_whole(tmp_path: Path) -> None:
    """A bad $LLM_IDE_CONFIG is the call's own: its env replaces the test's, as a child's would."""
    missing = tmp_path / "x.yaml"
    done = invoke("config", "show", env={"PATH": os.environ["PATH"], "LLM_IDE_CONFIG": str(missing)})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"error: LLM_IDE_CONFIG={missing}: no such config file (unset it, or =off for none)\n"
    assert "LLM_IDE_CONFIG" not in os.environ
    home = invoke("config", "show", "agent.step_limit", env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    user = tmp_path / ".config" / "llm-ide" / "config.yaml"
    assert home.stdout.splitlines()[0] == f"# user config: none (LLM_IDE_CONFIG is unset and {user} does not exist)"


def test_what_the_process_said_once_a_call_says_as_a_child_would(caplog: pytest.LogCaptureFixture) -> None:
    """A warning said once per process (the missing sandbox, a limit root cannot have, a model's missing usage) is
    said by every call, as by every child, and the test's process keeps what it had said."""
    log = logging.getLogger("llm_ide.test")
    said = [("limits", "processes"), ("usage", "m")]
    with caplog.at_level(logging.WARNING, logger="llm_ide.test"):
        warn_once(log, said[0], "first")
        for _ in range(2):
            with said_once():
                for key in said:
                    warn_once(log, key, f"call {key[0]}")
                    warn_once(log, key, "never: said")
        warn_once(log, said[0], "never: the process said it")
        warn_once(log, said[1], "the process had not said it")
    assert [r.message for r in caplog.records] == [
        "first",
        *["call limits", "call usage"] * 2,
        "the process had not said it",
    ]
