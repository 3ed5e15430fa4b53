from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import pytest
from conftest import all_gone, require_bwrap, running, wait_for

from llm_ide.config import ConfigError, load_config
from llm_ide.environments import LocalEnvironment, make_environment
from llm_ide.environments.base import EnvironmentFailure, FileSnapshot
from llm_ide.environments.output import OutputCap
from llm_ide.environments.sandbox import absent, resolve_inside
from llm_ide.environments.snapshots import SETTLED_NS

REPO_ROOT = Path(__file__).resolve().parents[1]
DEADLINE = 60  # seconds a loaded machine may take to start or end a child (the README's line under -n: 10 was short)
OWN = f"{os.getpid():07d}"  # in each sleep marker: not another worker's nor another session's (fixed width: no prefix)


@pytest.fixture
def env(tmp_path: Path) -> LocalEnvironment:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "mod.py").write_text("x = 1\n")
    environment = make_environment(load_config("default").environment, repo, "local-test", None, tmp_path / "tools")
    assert isinstance(environment, LocalEnvironment)
    yield environment
    environment.close()


def test_execute_in_repo_with_config_env_cwd_and_returncode(env: LocalEnvironment, tmp_path: Path) -> None:
    result = env.execute('pwd; echo "$PAGER $GIT_PAGER $NO_COLOR $TERM"; echo oops >&2; exit 3')
    assert result.output == f"{tmp_path / 'repo'}\ncat cat 1 dumb\noops\n"
    assert (result.returncode, result.timed_out, result.truncated) == (3, False, False)
    assert env.execute("ls; cat mod.py", cwd="pkg").output == "mod.py\nx = 1\n"
    assert env.workdir == str(tmp_path / "repo")
    assert env.tools_root == str(tmp_path / "tools") and Path(env.tools_root).is_dir()
    assert env.execute("read line; echo got:$line").output == "got:\n"  # stdin is /dev/null, never a hang


@pytest.mark.parametrize(("timeout", "said"), [(1, "1"), (1.1389187569904607, "1.1")])  # (a wall-time limit's share)
def test_timeout_kills_the_whole_process_group_and_keeps_partial_output(
    env: LocalEnvironment, timeout: float, said: str
) -> None:
    marker = f"300.1{OWN}{int(timeout * 10)}"  # each case its own: xdist runs them side by side
    command = f"echo started; sleep {marker} & sleep 300; echo never"
    result = env.execute(command, timeout=timeout)
    assert result.timed_out is True
    assert result.returncode == 137
    assert result.output.startswith("started\n")
    assert f"[command timed out after {said} s: " in result.output and "never" not in result.output
    assert all_gone(marker), "the background child outlived the timeout"
    assert env.execute("echo next").output == "next\n"


@pytest.mark.parametrize(
    ("command", "marker"),
    [
        ("exec >/dev/null 2>&1; sleep 120.1", "120.1"),
        ("exec 1>&- 2>&-; sleep 120.2", "120.2"),
        ("setsid sh -c 'exec >/dev/null 2>&1; sleep 120.3' & wait", "120.3"),
    ],
)
def test_timeout_holds_whatever_the_command_does_with_its_output(
    env: LocalEnvironment, command: str, marker: str
) -> None:
    if command.startswith("setsid"):
        require_bwrap()  # a new session leaves the process group: only the sandbox's PID namespace ends it
    result = env.execute(command.replace(marker, marker + OWN), timeout=1)
    assert (result.timed_out, result.returncode) == (True, 137)
    assert result.duration < 60, f"a 1 s timeout took {result.duration:.0f} s"
    assert all_gone(marker + OWN)


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_background_child_holding_the_pipe_does_not_block(tmp_path: Path, sandbox: str) -> None:
    if sandbox == "bwrap":
        require_bwrap()
    marker = {"bwrap": "300.4", "none": "300.7"}[sandbox] + OWN  # each its own: xdist may run the two at once
    environment = LocalEnvironment(tmp_path, sandbox=sandbox, tools_dir=tmp_path / "tools")
    result = environment.execute(f"sleep {marker} & echo done", timeout=20)
    try:
        assert (result.output, result.returncode, result.timed_out) == ("done\n", 0, False)
        if sandbox == "bwrap":  # its own PID namespace: every process ends with the command
            assert all_gone(marker)
        else:  # it outlives the command (the run's, until the run ends): found once its fork has become `sleep`
            wait_for(lambda: running(marker), 60, "the background process to run on")
    finally:
        for pid in running(marker):
            os.kill(pid, signal.SIGKILL)


def test_100mb_of_output_is_capped_in_bounded_memory(env: LocalEnvironment) -> None:
    env.output_max_bytes = 10_000
    tracemalloc.start()
    try:
        result = env.execute("echo BEGIN; yes 0123456789 | head -c 100000000; echo; echo END")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, f"peak Python allocation {peak} bytes while streaming 100 MB"
    assert result.truncated is True and result.returncode == 0
    assert result.output.startswith("BEGIN\n0123456789\n")
    assert result.output.endswith("\nEND\n")
    total = len("BEGIN\n") + 100_000_000 + len("\nEND\n")
    assert f"bytes of output elided ({total} bytes in total)" in result.output
    head, note, tail = result.output.split("\n[", 1)[0], *result.output.split("\n[", 1)[1].split("]\n", 1)
    assert (len(head) + 1, len(tail)) == (5_000, 5_000)
    assert note.startswith(f"... {total - 10_000} bytes")


@pytest.mark.parametrize(
    ("chunks", "max_bytes", "expected_text", "truncated"),
    [
        ([b"abc", b"def"], 10, "abcdef", False),
        ([b"0123456789"], 10, "0123456789", False),
        ([b"01234", b"56789", b"ab"], 4, "01\n[... 8 bytes of output elided (12 bytes in total) ...]\nab", True),
        ([b"x" * 100, b"yz"], 6, "xxx\n[... 96 bytes of output elided (102 bytes in total) ...]\nxyz", True),
    ],
)
def test_output_cap_keeps_head_and_tail(
    chunks: list[bytes], max_bytes: int, expected_text: str, truncated: bool
) -> None:
    cap = OutputCap(max_bytes)
    for chunk in chunks:
        cap.feed(chunk)
    assert (cap.text(), cap.truncated, cap.total) == (expected_text, truncated, sum(map(len, chunks)))


def test_read_write_and_copy_files(env: LocalEnvironment, tmp_path: Path) -> None:
    env.write_file("new/dir/data.bin", b"\xff\xfe\x00binary")
    env.execute("chmod +x pkg/mod.py")
    env.write_file("pkg/mod.py", b"x = 2\n")
    snapshots = env.read_files(["pkg/mod.py", "new/dir/data.bin", "missing.py", "pkg"])
    repo = Path(env.workdir)
    assert snapshots == {
        "pkg/mod.py": type(snapshots["pkg/mod.py"])(b"x = 2\n", (repo / "pkg/mod.py").stat().st_mtime_ns),
        "new/dir/data.bin": type(snapshots["pkg/mod.py"])(
            b"\xff\xfe\x00binary", (repo / "new/dir/data.bin").stat().st_mtime_ns
        ),
        "missing.py": None,
        "pkg": None,
    }
    assert os.access(repo / "pkg/mod.py", os.X_OK), "write_file must keep the file's mode"
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "a.txt").write_text("a")
    env.copy_in(source, "vendor")
    assert env.execute("cat vendor/sub/a.txt").output == "a"


def test_missing_repository_and_unknown_type_are_clear_errors(tmp_path: Path) -> None:
    config = load_config("default").environment
    with pytest.raises(EnvironmentFailure, match="repository not found"):
        make_environment(config, tmp_path / "nope", "r", None, None)
    with pytest.raises(EnvironmentFailure, match="needs a repository"):
        make_environment(config, None, "r", None, None)
    with pytest.raises(
        ConfigError, match=r"settings: environment.type: input should be 'local' or 'docker' \(got 'vm'\)"
    ):
        load_config("default", environment={"type": "vm"})


def test_own_tools_dir_is_removed_on_close(tmp_path: Path) -> None:
    environment = LocalEnvironment(tmp_path)
    tools = Path(environment.tools_root)
    assert tools.is_dir() and tools != tmp_path
    environment.close()
    assert not tools.exists() and tmp_path.exists()


NEVER_CLOSED = """
import os, sys
from pathlib import Path
from llm_ide.environments import LocalEnvironment
env = LocalEnvironment(Path(sys.argv[1]))
folders = [env.tools_root, env.scratch, str(Path(env.private_dir("x")).parent)]
child = os.fork()
if child == 0:
    sys.exit(0)  # a normal exit: its interpreter's finalizers run, not for the parent's folders
os.waitpid(child, 0)
print(*[Path(folder).is_dir() for folder in folders], *folders)
"""


def test_an_environment_never_closed_removes_its_temp_folders_when_dropped_or_at_exit(tmp_path: Path) -> None:
    """A Python API caller that never closes its environment leaves no temp folder on the host: dropped, the
    environment removes its own (tools, scratch, private); left open at the interpreter's exit, the same; a forked
    child that exits normally leaves its parent's."""
    environment = LocalEnvironment(tmp_path)
    folders = [Path(environment.tools_root), Path(str(environment.scratch)), Path(environment.private_dir("x")).parent]
    assert [folder.is_dir() for folder in folders] == [True, True, True]
    del environment
    gc.collect()
    assert [folder for folder in folders if folder.exists()] == []
    done = subprocess.run([sys.executable, "-c", NEVER_CLOSED, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    *alive, tools, scratch, private = done.stdout.split()
    assert alive == ["True", "True", "True"]
    assert [Path(folder).name.split("-")[2] for folder in (tools, scratch, private)] == ["tools", "tmp", "private"]
    assert [folder for folder in (tools, scratch, private) if Path(folder).exists()] == []


def test_ctrl_c_during_a_command_kills_its_process_group(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import faulthandler, signal
        from pathlib import Path
        from llm_ide.environments import LocalEnvironment
        faulthandler.register(signal.SIGUSR1, open({str(tmp_path / "stacks")!r}, "w"), all_threads=True)
        env = LocalEnvironment(Path({str(tmp_path)!r}))
        print("running", flush=True)
        env.execute("sleep 300.5{OWN} & echo started > child.pid; sleep 300", timeout=600)
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline() == "running\n"
    pid_file = tmp_path / "child.pid"
    end = time.monotonic() + DEADLINE
    while not pid_file.exists() or not pid_file.read_text().strip():
        if time.monotonic() > end:
            pytest.fail(stuck(process, tmp_path / "stacks", "the command did not start"))
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        pytest.fail(stuck(process, tmp_path / "stacks", "Ctrl-C did not end the agent"))
    assert process.returncode != 0 and "KeyboardInterrupt" in stderr
    assert all_gone(f"300.5{OWN}"), "Ctrl-C left the command's child running"


def stuck(process: subprocess.Popen[str], stacks: Path, what: str) -> str:
    """Why a child missed its deadline: its threads' Python stacks (its faulthandler writes them to `stacks` on
    SIGUSR1) and its processes (state, kernel wait, command line), then it is killed."""
    process.send_signal(signal.SIGUSR1)
    end = time.monotonic() + DEADLINE
    while "most recent call first" not in stacks.read_text() and time.monotonic() < end:
        time.sleep(0.05)
    tree, level = [], [process.pid]
    while level:
        tree += [f"{pid} {read_proc(pid, 'wchan')} {read_proc(pid, 'cmdline').replace(chr(0), ' ')}" for pid in level]
        level = [
            int(entry.name)
            for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and parent(int(entry.name)) in level
        ]
    process.kill()
    _, stderr = process.communicate()
    return "\n".join([what, stacks.read_text(), *tree, stderr[-2000:]])


def parent(pid: int) -> int:
    fields = read_proc(pid, "stat").rsplit(")", 1)
    return int(fields[1].split()[1]) if len(fields) == 2 else 0


def read_proc(pid: int, name: str) -> str:
    try:
        return Path(f"/proc/{pid}/{name}").read_text(errors="replace")
    except OSError:
        return ""


def test_a_command_dies_with_a_killed_agent(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from llm_ide.environments import LocalEnvironment
        env = LocalEnvironment(Path({str(tmp_path)!r}))
        env.execute("echo started > command.pid; exec sleep 300.6{OWN}", timeout=600)
        """
    )
    process = subprocess.Popen([sys.executable, "-c", script], cwd=REPO_ROOT)
    pid_file = tmp_path / "command.pid"
    end = time.monotonic() + DEADLINE
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < end, "the command did not start"
        time.sleep(0.05)
    assert running(f"300.6{OWN}")
    process.kill()
    process.wait(timeout=DEADLINE)
    assert all_gone(f"300.6{OWN}"), "the command outlived the SIGKILLed agent"


@pytest.mark.parametrize(
    ("mount_at", "problem"),
    [
        ("/testbed", None),
        ("/srv-llm-ide-test/deep/repo", None),
        ("/usr/llm-ide-missing", "a mount point must be an absolute path that exists or whose top folder does not"),
        ("relative/path", "a mount point must be an absolute path"),
    ],
)
def test_the_sandbox_shows_the_repository_at_its_mount_point(
    tmp_path: Path, mount_at: str, problem: str | None
) -> None:
    require_bwrap()
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "a.py").write_text("x = 1\n")
    if problem is not None:
        with pytest.raises(EnvironmentFailure, match=problem):
            LocalEnvironment(repo, mount_at=mount_at, tools_dir=tmp_path / "tools")
        return
    with LocalEnvironment(repo, mount_at=mount_at, tools_dir=tmp_path / "tools") as environment:
        assert environment.workdir == mount_at
        result = environment.execute("pwd && cat a.py && echo y > b.py && ls /", cwd="pkg")
        assert result.output.startswith(f"{mount_at}/pkg\nx = 1\n") and result.returncode == 0
        assert "usr\n" in result.output  # the rest of the file system is there, read-only
        assert (repo / "pkg" / "b.py").read_text() == "y\n"  # written through the mount into the repository
        assert environment.execute("touch /usr/llm-ide-probe").returncode != 0
    assert not Path(mount_at).exists()  # nothing made on the host


def test_a_file_not_there_reads_as_nothing_at_once_and_every_path_reads_as_its_real_path_says(tmp_path: Path) -> None:
    """A miss (a plain name no file has, in a folder that is there) is answered without resolving the path; every
    other path reads as before, through its real path: `..` after a missing folder, dangling symlinks whose target
    resolves by name, a folder symlink through a missing one, the way out of the repository, names no file can have."""
    repo, outside = tmp_path / "repo", tmp_path / "outside.py"
    (repo / "sub").mkdir(parents=True)
    outside.write_text("secret = 1\n")
    (repo / "a.py").write_text("a = 1\n")
    (repo / "sub" / "in.py").write_text("b = 2\n")
    links = {"dangling": "nope/../a.py", "gone": "nowhere", "dirlink": "nope/../sub", "out": "../outside.py"}
    for name, target in links.items():
        (repo / name).symlink_to(target)
    paths = ["a.py", "missing.py", "sub/missing.py", "nope/x.py", "nope/../a.py", "sub/../a.py", "dangling", "gone"]
    paths += ["dirlink/in.py", "dirlink/missing.py", "out", "../outside.py", "../missing.py", str(outside), "sub", "."]
    paths += ["", "sub/", "nope/", "a.py/x", "x" * 300, "nope/..", str(repo / "missing.py"), "/nowhere/x.py"]
    with LocalEnvironment(repo, tools_dir=tmp_path / "tools", sandbox="none") as env:
        read = env.read_files(paths)
        for path in paths:
            target = resolve_inside(env.repo, path)
            assert read[path] == (None if target is None else FileSnapshot.read(target)), path
    cheap = [path for path in paths if absent(os.path.join(repo, path))]
    assert cheap == ["missing.py", "sub/missing.py", "../missing.py", str(repo / "missing.py")]  # not through `nope`
    found = ["a.py", "nope/../a.py", "sub/../a.py", "dangling", "dirlink/in.py"]  # (by name where the kernel has none)
    assert [path for path in paths if read[path] is not None] == found


@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
def test_what_commands_leave_in_their_temp_folder_goes_with_the_run(tmp_path: Path, sandbox: str) -> None:
    """With or without bubblewrap, a command's temporary files (a debugger's state folder, pytest's tmp_path) are made
    in the run's own scratch folder, removed when the environment closes; the host's temp folder keeps none of them."""
    if sandbox == "bwrap":
        require_bwrap()
    repo = tmp_path / "repo"
    repo.mkdir()
    made = 'import tempfile; print(tempfile.mkdtemp(prefix="left-"))'
    with LocalEnvironment(repo, tools_dir=tmp_path / "tools", sandbox=sandbox) as env:
        scratch = env.scratch
        assert scratch is not None and Path(scratch).is_dir()
        inside = env.execute(f"{sys.executable} -c '{made}'").output.strip()
        assert inside.startswith(scratch + os.sep) and Path(inside).is_dir()
    assert not Path(scratch).exists() and not Path(inside).exists()


def test_a_file_read_again_is_not_reread_while_its_stat_says_unchanged_and_every_change_is_seen(tmp_path: Path) -> None:
    """Each step reads the files its code context shows (whole: a same-size edit with the mtime restored must be
    seen); a file whose stat is as at its last read, settled by then, is that read again. Any write, rename or
    `touch` changes the ctime (which no one can set back): read anew."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("a = 1\n")
    (repo / "b.py").write_text("b = 1\n")
    with LocalEnvironment(repo, tools_dir=tmp_path / "tools", sandbox="none") as env:
        changed = (repo / "a.py").stat().st_ctime_ns
        while time.time_ns() < changed + SETTLED_NS[0] + 10_000_000:  # (the files age: not a synchronisation)
            time.sleep(0.01)
        first = env.read_files(["a.py", "b.py"])
        assert first["a.py"].settled and env.read_files(["a.py"])["a.py"] is first["a.py"]  # not read again

        mtime = (repo / "a.py").stat().st_mtime_ns
        (repo / "a.py").write_text("a = 2\n")  # the same size, its mtime put back
        os.utime(repo / "a.py", ns=(mtime, mtime))
        os.replace(repo / "b.py", repo / "c.py")
        (repo / "b.py").write_text("b = 2\n")  # another file in its place
        os.utime(repo / "b.py", ns=(first["b.py"].mtime_ns,) * 2)
        again = env.read_files(["a.py", "b.py"])
        assert (again["a.py"].data, again["b.py"].data) == (b"a = 2\n", b"b = 2\n")
        assert not again["a.py"].settled and env.read_files(["a.py"])["a.py"] is not again["a.py"]  # just changed

        (repo / "b.py").unlink()
        assert env.read_files(["b.py", "c.py"]) == {"b.py": None, "c.py": FileSnapshot.read(repo / "c.py")}
