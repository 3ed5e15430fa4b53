"""The local environment contains the agent (issue 10 §3): paths resolved and refused outside the repository, commands
in bubblewrap (own PID namespace and /proc, the rest read-only, network optional), timeouts whatever the command
does with its output, and no control sequences on the console (the patch against a deleted `.git`:
test_containment_patch.py)."""

from __future__ import annotations

import base64
import os
import pwd
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import make_git_repo, require_bwrap

from llm_ide.actions import execute_action
from llm_ide.codebase import Codebase
from llm_ide.codeview import CodeView
from llm_ide.config import load_config
from llm_ide.environments import LocalEnvironment, make_environment
from llm_ide.terminal import BIDI, CONTROL, terminal_safe

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def needs_bwrap() -> None:
    require_bwrap()


def workspace(env: LocalEnvironment) -> Codebase:
    return Codebase(env=env, view=CodeView(env), templates=load_config("default").templates)


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose symlinks lead out: to /etc/passwd, to a file and to a directory outside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me\n")
    repo = make_git_repo(tmp_path / "repo", {"app.py": "x = 1\n"})
    (repo / "passwd").symlink_to("/etc/passwd")
    (repo / "victim.txt").symlink_to(outside / "victim.txt")
    (repo / "escape").symlink_to(outside)
    (repo / "inner.py").symlink_to("app.py")
    return repo, outside


@pytest.mark.parametrize(
    ("action", "params"),
    [
        ("view", {"path": "passwd"}),
        ("view_symbol", {"path": "passwd", "symbol": "root"}),
        ("edit", {"path": "victim.txt", "old": "keep me", "new": "owned"}),
        ("create", {"path": "escape/new.txt", "content": "x"}),
        ("create", {"path": "escape/deeper/new.txt", "content": "x"}),
        ("search", {"pattern": "keep", "path": "escape"}),
        ("search", {"pattern": "root", "path": "passwd"}),
        ("view", {"path": "/etc/passwd"}),
        ("edit", {"path": "../outside/victim.txt", "old": "keep me", "new": "owned"}),
    ],
)
def test_paths_leading_outside_the_repository_are_refused(
    hostile: tuple[Path, Path], tmp_path: Path, action: str, params: dict
) -> None:
    repo, outside = hostile
    env = LocalEnvironment(repo, tools_dir=tmp_path / "tools")
    outcome = execute_action(workspace(env), action, params)
    assert outcome.returncode == 2
    assert "outside the repository" in outcome.observation
    assert "root:" not in outcome.observation and "keep me" not in outcome.observation
    assert (outside / "victim.txt").read_text() == "keep me\n"
    assert sorted(p.name for p in outside.rglob("*")) == ["victim.txt"]


def test_symlinks_inside_the_repository_still_work(hostile: tuple[Path, Path], tmp_path: Path) -> None:
    repo, _ = hostile
    env = LocalEnvironment(repo, tools_dir=tmp_path / "tools")
    ws = workspace(env)
    assert "x = 1" in execute_action(ws, "view", {"path": "inner.py"}).observation
    assert execute_action(ws, "edit", {"path": "inner.py", "old": "x = 1", "new": "x = 2"}).returncode == 0
    assert (repo / "app.py").read_text() == "x = 2\n"
    # a file the agent's command shows (cat) through a symlink out of the repository never enters the code context
    assert execute_action(ws, "bash", {"command": "cat passwd victim.txt > /dev/null; echo ok"}).accessed == []


@pytest.mark.usefixtures("needs_bwrap")
def test_commands_cannot_read_the_agents_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "Zq9xW2" + "kP7vR4mN8s"
    monkeypatch.setenv("LLM_IDE_TEST_API_KEY", secret)
    env = LocalEnvironment(tmp_path, tools_dir=tmp_path / "tools")
    probe = "base64 -w0 /proc/$PPID/environ; echo; for f in /proc/[0-9]*/environ; do base64 -w0 $f; echo; done"
    result = env.execute(probe)
    decoded = b"".join(base64.b64decode(line) for line in result.output.split() if line)
    assert decoded, result.output
    assert secret.encode() not in decoded and b"LLM_IDE_TEST_API_KEY" not in decoded
    assert str(os.getpid()) not in env.execute("ls /proc").output.split()  # its own /proc: the agent is not there


@pytest.mark.usefixtures("needs_bwrap")
def test_the_sandbox_writes_only_the_repository_and_detached_processes_end_with_the_command(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = LocalEnvironment(repo, tools_dir=tmp_path / "tools")
    probe = Path.home() / f".llm-ide-probe-{tmp_path.name}"
    mark = os.getpid()  # the sleeps this test starts, not those of a suite running beside it on the machine
    command = (
        f"echo in > inside.txt; echo out > {tmp_path}/outside.txt; echo $?; echo home > {probe}; echo $?;"
        " mktemp >/dev/null && echo scratch-ok;"
        f" setsid sleep 310.7{mark} & ( sleep 310.8{mark} & ) ; nohup sleep 310.9{mark} >/dev/null 2>&1 & echo started"
    )
    result = env.execute(command, timeout=60)
    assert result.output.splitlines()[-2:] == ["scratch-ok", "started"] and not result.timed_out
    assert (repo / "inside.txt").read_text() == "in\n"
    try:
        assert not (tmp_path / "outside.txt").exists() and not probe.exists()
    finally:
        probe.unlink(missing_ok=True)
    survivors = subprocess.run(["pgrep", "-f", f"sleep 310.[789]{mark}$"], capture_output=True, text=True).stdout
    assert survivors == ""


@pytest.mark.usefixtures("needs_bwrap")
def test_the_home_is_the_runs_own_from_one_command_to_the_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pip install --user x` (pip's choice where site-packages is read-only) then `import x` failed: the home was a new
    tmpfs at each command. Now the commands' home is the run's own folder: nothing of the user's in it, what a command
    leaves there the next one finds, and it goes with the run. (Where the user's Python lives in the home passwd names,
    e.g. ~/.pyenv, its folder is shown read-only in it: a mount point in the listing.)"""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text("machine example.com password hunter2\n")
    monkeypatch.setenv("HOME", str(home))
    env = LocalEnvironment(make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"}), tools_dir=tmp_path / "tools")
    site = "~/.local/lib/site-packages"
    try:
        first = env.execute(f"ls -A ~; mkdir -p {site} && echo 'KEPT = 7' > {site}/kept.py && echo $HOME")
        then = env.execute(f"cd {site} && python3 -c 'import kept; print(kept.KEPT)'; cat ~/.netrc; echo $HOME")
        passwd = Path(os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir))  # hidden too, shown as the run's home
        shown = {path.relative_to(passwd).parts[0] for path in env.readable if path.is_relative_to(passwd)}
        assert first.output.split() == [*sorted(shown), str(home)] and first.returncode == 0, first.output
        lines = then.output.splitlines()
        assert lines[0] == "7" and "No such file or directory" in lines[1] and lines[2] == str(home), then.output
        kept = Path(str(env.home))
        assert (kept / ".local/lib/site-packages/kept.py").read_text() == "KEPT = 7\n"
    finally:
        env.close()
    assert sorted(path.name for path in home.iterdir()) == [".netrc"] and not kept.exists()


@pytest.mark.usefixtures("needs_bwrap")
@pytest.mark.parametrize(("network", "interfaces"), [("none", {"lo"}), ("llm-ide", None)])
def test_network_is_a_setting(tmp_path: Path, network: str, interfaces: set[str] | None) -> None:
    config = load_config("default", environment={"network": network, "tools": []})
    env = make_environment(config.environment, tmp_path, "net", None, tmp_path / "tools")
    output = env.execute("tail -n +3 /proc/net/dev | cut -d: -f1").output
    found = {line.strip() for line in output.splitlines() if line.strip()}
    if interfaces is None:
        assert found - {"lo"}, "the default keeps the host's network"
    else:
        assert found == interfaces


@pytest.mark.parametrize(
    ("bwrap", "said"),
    [
        (None, "bubblewrap (bwrap) is not installed"),
        ("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n", "does not work here"),
    ],
)
def test_a_missing_or_unusable_bwrap_is_said_once_and_commands_still_run(
    tmp_path: Path, bwrap: str | None, said: str
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "sh", "setpriv", "echo", "cat"):
        if found := shutil.which(tool):
            (bin_dir / tool).symlink_to(found)
    if bwrap is not None:
        (bin_dir / "bwrap").write_text(bwrap)
        (bin_dir / "bwrap").chmod(0o755)
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from llm_ide.environments import LocalEnvironment, make_environment
        for _ in range(2):
            env = LocalEnvironment(Path({str(tmp_path)!r}), tools_dir=Path({str(tmp_path / "tools")!r}))
            print(env.execute("echo ran").output, end="")
        """
    )
    env = {**os.environ, "PATH": str(bin_dir)}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ran\nran\n"
    assert done.stderr.count(said) == 1 and done.stderr.count("run unsandboxed") == 1


def test_control_sequences_never_reach_the_console(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    hostile = r"printf '\033]0;pwned\007\033[2J\033[31mred\033[0m \033]52;c;Y2xpcA==\007done \342\200\256txt.exe\n'"
    model = write_script(
        tmp_path / "script.yaml",
        [act("Print.", "bash", command=hostile), reflect(False, "Printed."), act("Done.", "submit")],
    )
    (tmp_path / "no-tools.yaml").write_text("environment:\n  tools: []\n")
    command = [sys.executable, "-c", "from llm_ide.cli import app; app()", "run", "--repo", str(repo)]
    command += ["--task", "t", "--model", model, "--output", str(tmp_path / "out"), "--thread-id", "esc"]
    command += ["--config", str(tmp_path / "no-tools.yaml")]
    env = {**os.environ, "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert b"red done <U+202E>txt.exe" in done.stdout  # the observation's text, its sequences removed or shown
    assert "\u202e".encode() not in done.stdout + done.stderr
    assert b"\x1b]" not in done.stdout + done.stderr
    assert b"\x1b[2J" not in done.stdout and b"\x1b[31m" not in done.stdout and b"\x07" not in done.stdout


@pytest.mark.parametrize("control", ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2069"])
def test_bidirectional_controls_are_shown_not_obeyed(control: str) -> None:
    shown = terminal_safe(f"name{control}txt.exe")
    assert shown == f"name<U+{ord(control):04X}>txt.exe" and control not in shown


def test_every_character_is_made_safe_as_the_substitutions_make_it() -> None:
    """A text of printable characters is returned as it is: no character the substitutions change is let through."""
    substituted = lambda text: BIDI.sub(lambda m: f"<U+{ord(m[0]):04X}>", CONTROL.sub("", text))  # noqa: E731
    for start in range(0, 0x110000, 0x1000):  # (every control character is in the first plane)
        text = "\n\t".join(chr(code) for code in range(start, start + 0x1000) if not 0xD800 <= code < 0xE000)
        assert terminal_safe(text) == substituted(text)
        assert start > 0xFFFF or all(terminal_safe(f"a{c}\nb") == substituted(f"a{c}\nb") for c in text)


@pytest.mark.usefixtures("needs_bwrap")
def test_writable_setting_adds_paths_and_a_missing_one_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "cache").mkdir()
    writable = [str(tmp_path / "cache"), str(tmp_path / "not-there")]
    config = load_config("default", environment={"writable": writable, "tools": []})
    env = make_environment(config.environment, tmp_path / "repo", "w", None, tmp_path / "tools")
    result = env.execute(f"echo hit > {tmp_path}/cache/entry && echo ok; (echo no > {tmp_path}/other) 2>/dev/null")
    assert result.output == "ok\n"
    assert (tmp_path / "cache" / "entry").read_text() == "hit\n" and not (tmp_path / "other").exists()


NO_BWRAP = "bubblewrap (bwrap) is not installed", "install the bubblewrap package, or allow user namespaces"


@pytest.mark.parametrize(
    ("sandbox", "said"),
    [("bwrap", NO_BWRAP), ("none", ("environment.sandbox is none", "environment.sandbox: bwrap"))],
)
def test_an_unsandboxed_run_says_so_on_the_console(tmp_path: Path, sandbox: str, said: tuple[str, str]) -> None:
    """Without bwrap (none on PATH, or `environment.sandbox: none`), local commands run on the host as they are: the
    user reads it at the start of the run, not only in the log file."""
    bin_dir = tmp_path / "bin"  # every program of PATH but bwrap
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        for program in Path(folder).glob("*") if os.access(folder, os.R_OK | os.X_OK) else []:  # (root's, for a user)
            target = bin_dir / program.name
            if program.name != "bwrap" and not target.exists() and os.access(program, os.X_OK):
                target.symlink_to(program)
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    script = [act("List it.", "bash", command="ls"), reflect(False, "Listed."), act("Done.", "submit")]
    model = write_script(tmp_path / "s.yaml", script)
    (config := tmp_path / "c.yaml").write_text(f"environment: {{tools: [], sandbox: {sandbox}}}\n")
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", str(config)]
    done = subprocess.run(
        [sys.executable, "-m", "llm_ide", *args, "--output", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env={**os.environ, **({"PATH": str(bin_dir)} if sandbox == "bwrap" else {})},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    problem, remedy = said
    warning = (
        f"{problem}: local commands run unsandboxed, with access to the whole machine and the agent's environment "
        f"({remedy}, to contain them)"
    )
    assert done.stderr.splitlines()[0] == warning
    assert done.stdout.index("… starting environment") < done.stdout.index("step   1 bash: ls")
    assert warning in next((tmp_path / "out").glob("*.log")).read_text()
