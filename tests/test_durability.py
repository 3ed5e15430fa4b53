"""Kills at exact moments (failpoints) and resumes: nothing lost, nothing done twice, never a restart."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from agent_script import act, reflect, write_script
from conftest import isolated_environ, killed_in_command, make_git_repo
from in_process import invoke

STEPS = [
    act("First.", "bash", command="echo one >> trail.txt"),
    reflect(False, "one"),
    act("Second.", "bash", command="echo two >> trail.txt"),
    reflect(False, "two"),
    act("Third.", "edit", path="README.md", old="demo\n", new="demo, edited\n"),
    reflect(False, "three"),
    act("Fourth.", "create", path="notes.txt", content="a note\n"),
    reflect(False, "four"),
    act("Done.", "submit"),
]
THOUGHTS = ["First.", "Second.", "Third.", "Fourth.", "Done."]
STOPPED = "The run was stopped while this"
RERUN = "[The run was stopped while this command ran. The repository's files were put back"
HALF_WAY = "echo two-a >> trail.txt; touch waiting; while [ ! -f go ]; do sleep 0.05; done; echo two-b >> trail.txt"


def llm_ide(args: list[str], cwd: Path, failpoints: str = "", env: dict[str, str] | None = None) -> subprocess.Popen:
    env = dict(os.environ if env is None else env)
    if failpoints:
        env["LLM_IDE_FAILPOINTS"] = failpoints
    return subprocess.Popen(
        [sys.executable, "-c", "from llm_ide.cli import app; app()", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def rerun(args: list[str], cwd: Path) -> tuple[int, str]:
    """A run to its end (no failpoint, nothing to kill): in-process."""
    done = invoke(*args, cwd=cwd)
    return done.returncode, done.stdout + done.stderr


def finish(process: subprocess.Popen) -> tuple[int, str]:
    output = process.communicate(timeout=180)[0].decode()
    return process.returncode, output


def mark(tmp_path: Path) -> str:
    """LLM_IDE_TEST_MARK's value in the environment of the run's commands: this test's alone."""
    return f"{tmp_path.name}-{os.getpid()}"


def setup_run(tmp_path: Path, steps: list[str] = STEPS) -> tuple[Path, list[str]]:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "demo\n", ".gitignore": "waiting\ngo\n"})
    environment = {"tools": [], "env": {"LLM_IDE_TEST_MARK": mark(tmp_path)}}
    (tmp_path / "no-tools.yaml").write_text(yaml.safe_dump({"environment": environment}))
    model = write_script(tmp_path / "script.yaml", steps)
    args = ["run", "--repo", str(repo), "--task", "write the trail", "--model", model, "--thread-id", "T"]
    args += ["--output", str(tmp_path / "out"), "--config", str(tmp_path / "no-tools.yaml")]
    return repo, args


def trajectory(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "out" / "T.traj.json").read_text())


def assert_complete_run(tmp_path: Path, repo: Path) -> dict:
    traj = trajectory(tmp_path)
    assert traj["info"]["exit_status"] == "submitted"
    assert [o["thought"] for o in traj["operations"]] == THOUGHTS
    assert [c["index"] for c in traj["model_calls"]] == list(range(len(THOUGHTS)))  # one call per step
    assert (repo / "trail.txt").read_text() == "one\ntwo\n"
    assert (repo / "README.md").read_text() == "demo, edited\n"
    assert (repo / "notes.txt").read_text() == "a note\n"
    for text in ("+one\n+two", "+demo, edited", "+a note"):
        assert text in traj["info"]["submission"]
    return traj


@pytest.mark.slow
@pytest.mark.parametrize("hit", [2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
def test_kill_between_saved_writes_and_checkpoint_row_resumes(tmp_path: Path, hit: int) -> None:
    """The n-th task's writes are saved, the process dies before the checkpoint row: the rerun resumes it. (The run
    writes 11: the writes of the nodes that call nothing outside are held with their checkpoint, and passed over.)"""
    repo, args = setup_run(tmp_path)
    code, output = finish(llm_ide(args, tmp_path, f"checkpoint.writes={hit}"))
    assert code == -signal.SIGKILL, output
    code, output = rerun(args, tmp_path)
    assert code == 0, output
    traj = assert_complete_run(tmp_path, repo)
    assert not any(o["observation"].startswith(STOPPED) for o in traj["operations"])


@pytest.mark.parametrize(
    "failpoint",
    [
        pytest.param("execute.begun=1", marks=pytest.mark.slow),  # the first command recorded as started, not run
        pytest.param("execute.done=1", marks=pytest.mark.slow),  # the first command run, its step not saved
        "execute.begun=2",
        "execute.done=2",
        pytest.param("execute.begun=3", marks=pytest.mark.slow),  # the edit
        "execute.done=3",
        pytest.param("execute.done=4", marks=pytest.mark.slow),  # the create
    ],
)
def test_kill_around_an_operation_leaves_its_effect_exactly_once(tmp_path: Path, failpoint: str) -> None:
    """Killed before or after an operation ran, its step not saved: the rerun puts the worktree back as the last
    saved step left it and runs the operation again; a command's observation says so (its effects outside the
    worktree may have happened twice), an edit's or a create's is the usual one."""
    repo, args = setup_run(tmp_path)
    code, output = finish(llm_ide(args, tmp_path, failpoint))
    assert code == -signal.SIGKILL, output
    code, output = rerun(args, tmp_path)
    assert code == 0, output
    traj = assert_complete_run(tmp_path, repo)
    hit = int(failpoint.split("=")[1])
    observations = [o["observation"] for o in traj["operations"]]
    assert [n for n, o in enumerate(observations, 1) if o.startswith(RERUN)] == ([hit] if hit <= 2 else [])
    assert [o for o in observations if STOPPED in o and not o.startswith(RERUN)] == []
    assert observations[2].startswith("Edited README.md") and observations[3].startswith("Created notes.txt")


def test_a_command_killed_half_way_is_undone_and_run_again(tmp_path: Path) -> None:
    """SIGKILLed while its command runs, after the first half of its effect (`two-a`): the rerun puts the worktree
    back (no `two-a`) and runs the whole command once."""
    steps = [*WAITING_STEPS]
    steps[2] = act("Wait.", "bash", command=HALF_WAY)
    repo, args = setup_run(tmp_path, steps)
    first = llm_ide(args, tmp_path)
    wait_for(repo / "waiting", first)
    assert (repo / "trail.txt").read_text() == "one\ntwo-a\n"
    killed_in_command(first, mark(tmp_path))
    (repo / "go").touch()
    code, output = rerun(args, tmp_path)
    assert code == 0, output
    traj = trajectory(tmp_path)
    assert [o["thought"] for o in traj["operations"]] == ["First.", "Wait.", "Done."]
    assert traj["operations"][1]["observation"].startswith(RERUN)
    assert (repo / "trail.txt").read_text() == "one\ntwo-a\ntwo-b\n"
    assert "+two-a\n+two-b" in traj["info"]["submission"]


def test_killed_after_the_graph_ended_keeps_the_patch(tmp_path: Path) -> None:
    """Killed after submit, before the outcome was saved: the rerun reports the run with its patch, not an empty one."""
    repo, args = setup_run(tmp_path)
    code, output = finish(llm_ide(args, tmp_path, "run.ended=1"))
    assert code == -signal.SIGKILL, output
    code, output = rerun(args, tmp_path)
    assert code == 0, output
    assert_complete_run(tmp_path, repo)


def test_truncated_trajectory_of_a_finished_run_keeps_the_patch(tmp_path: Path) -> None:
    repo, args = setup_run(tmp_path)
    code, output = rerun(args, tmp_path)
    assert code == 0, output
    path = tmp_path / "out" / "T.traj.json"
    path.write_bytes(path.read_bytes()[:200])
    code, output = rerun(args, tmp_path)
    assert code == 0, output
    assert_complete_run(tmp_path, repo)


def wait_for(path: Path, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert process.poll() is None, process.stdout.read().decode()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


WAITING_STEPS = [
    act("First.", "bash", command="echo one >> trail.txt"),
    reflect(False, "one"),
    act("Wait.", "bash", command="touch waiting; while [ ! -f go ]; do sleep 0.05; done; echo two >> trail.txt"),
    reflect(False, "two"),
    act("Done.", "submit"),
]


@pytest.mark.parametrize("thread", ["T", "U"])
def test_a_second_run_on_the_same_thread_or_repository_exits_naming_the_first(tmp_path: Path, thread: str) -> None:
    """The same thread id: its lock; another thread on the same repository: the repository's (each run's patch would
    hold the other's edits). Once the first has ended, the second runs."""
    repo, args = setup_run(tmp_path, WAITING_STEPS)
    first = llm_ide(args, tmp_path)
    wait_for(repo / "waiting", first)
    second = [*args[: args.index("--thread-id") + 1], thread, *args[args.index("--thread-id") + 2 :]]
    code, output = rerun(second, tmp_path)
    said = {
        "T": f"error: thread T is already being run by process {first.pid} (lock file {tmp_path / 'out' / 'T.lock'})",
        "U": f"error: repository {repo.resolve()} is being changed by another run (process {first.pid}); wait for it "
        "to end, or give this run a clone or a git worktree of its own",
    }
    assert (code, output) == (2, said[thread] + "\n")
    (repo / "go").touch()
    code, output = finish(first)
    assert code == 0, output
    assert (repo / "trail.txt").read_text() == "one\ntwo\n"
    if thread == "U":
        assert rerun(second, tmp_path)[0] == 0  # the repository's lock went with the first run
        assert (repo / "trail.txt").read_text() == "one\ntwo\none\ntwo\n"


@pytest.fixture(scope="session")
def killed_run(tmp_path_factory: pytest.TempPathFactory, session_cache: Path) -> tuple[Path, list[str]]:
    """A run SIGKILLed while its second command runs (one operation saved), made once per worker and kept
    as it was left beside it: a kill costs a child process (~1 s of CPU) and every test below reruns the same
    killed run. Its environment is a test's (conftest.isolated_environ); its temp folders are in its folder too, so
    that the copy holds all the run left."""
    folder = tmp_path_factory.mktemp("killed-run")
    (folder / "tmp").mkdir()
    repo, args = setup_run(folder, WAITING_STEPS)
    env = isolated_environ(tmp_path_factory, session_cache) | {"TMPDIR": str(folder / "tmp")}
    first = llm_ide(args, folder, env=env)
    wait_for(repo / "waiting", first)
    killed_in_command(first, mark(folder))
    assert json.loads((folder / "out" / "T.traj.json").read_bytes())["info"]["n_operations"] == 1
    shutil.copytree(folder, pristine(folder), symlinks=True)
    return folder, args


def pristine(folder: Path) -> Path:
    return folder.with_name(f"{folder.name}-pristine")


@pytest.fixture
def killed_mid_run(killed_run: tuple[Path, list[str]]) -> tuple[Path, list[str], bytes]:
    """The killed run as it was left, in its folder again (what the test before changed is gone); its trajectory's
    bytes."""
    folder, args = killed_run
    shutil.rmtree(folder)
    shutil.copytree(pristine(folder), folder, symlinks=True)
    return folder, args, (folder / "out" / "T.traj.json").read_bytes()


def corrupt(database: Path, how: str) -> None:
    wal = database.with_name(database.name + "-wal")
    match how:
        case "emptied":
            database.write_bytes(b"")
            wal.unlink(missing_ok=True)
        case "truncated":
            data = database.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
            wal.unlink(missing_ok=True)
            database.write_bytes(data[: len(data) // 3])
        case "wal_lost":
            wal.unlink()
        case "random":
            database.write_bytes(os.urandom(64 * 1024))
            wal.unlink(missing_ok=True)
        case "deleted":
            database.unlink()
            wal.unlink(missing_ok=True)


@pytest.mark.parametrize("how", ["emptied", "truncated", "wal_lost", "random", "deleted"])
def test_corrupt_checkpoint_is_one_line_and_keeps_the_trajectory(
    killed_mid_run: tuple[Path, list[str], bytes], how: str
) -> None:
    folder, args, saved = killed_mid_run
    repo = folder / "repo"
    corrupt(folder / "out" / "T.checkpoint.sqlite", how)
    (repo / "go").touch()
    code, output = rerun(args, folder)
    assert code == 2, output
    assert len(output.strip().splitlines()) == 1 and output.startswith("error:"), output
    assert (folder / "out" / "T.traj.json").read_bytes() == saved
    assert (repo / "trail.txt").read_text() == "one\n"


def test_an_empty_object_line_in_the_calls_log_is_skipped(killed_mid_run: tuple[Path, list[str], bytes]) -> None:
    folder, args, _ = killed_mid_run
    with (folder / "out" / "T.calls.jsonl").open("a") as handle:
        handle.write("{}\n[1, 2]\n")
    (folder / "repo" / "go").touch()
    code, output = rerun(args, folder)
    assert code == 0, output
    traj = trajectory(folder)
    assert [c["index"] for c in traj["model_calls"]] == list(range(3))
    assert traj["operations"][1]["observation"].startswith(RERUN)


def test_full_disk_ends_the_run_in_one_line_and_it_resumes_once_there_is_room(tmp_path: Path, small_disk: Path) -> None:
    steps = [
        act("First.", "bash", command="echo one >> trail.txt"),
        reflect(False, "one"),
        act("Wait.", "bash", command="touch waiting; while [ ! -f go ]; do sleep 0.05; done; echo two >> trail.txt"),
        reflect(False, "two"),
        act("Third.", "bash", command="echo three >> trail.txt"),
        reflect(False, "three"),
        act("Done.", "submit"),
    ]
    repo, args = setup_run(tmp_path, steps)
    args[args.index("--output") + 1] = str(small_disk / "out")
    first = llm_ide(args, tmp_path)
    wait_for(repo / "waiting", first)
    with pytest.raises(OSError), (small_disk / "filler").open("wb") as handle:
        while True:
            handle.write(b"\0" * 65536)
            handle.flush()
    (repo / "go").touch()
    code, output = finish(first)
    assert code == 1, output
    assert "Traceback" not in output and ("No space left on device" in output or "disk is full" in output), output
    saved = json.loads((small_disk / "out" / "T.traj.json").read_text())
    assert saved["info"]["exit_status"] in (None, "error")
    (small_disk / "filler").unlink()
    code, output = rerun(args, tmp_path)
    assert code == 0, output
    traj = json.loads((small_disk / "out" / "T.traj.json").read_text())
    assert [o["thought"] for o in traj["operations"]] == ["First.", "Wait.", "Third.", "Done."]
    assert (repo / "trail.txt").read_text() == "one\ntwo\nthree\n"


def test_read_only_run_folder_is_one_line_and_keeps_everything(killed_mid_run: tuple[Path, list[str], bytes]) -> None:
    """A checkpoint (and trajectory) on a read-only mount: one line, nothing changed (a read-only bind mount holds
    even for root, unlike file modes)."""
    folder, args, saved = killed_mid_run
    out = folder / "out"
    if subprocess.run(["mount", "--bind", str(out), str(out)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount (needs root)")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(out)], check=True, capture_output=True)
        (folder / "repo" / "go").touch()
        code, output = rerun(args, folder)
    finally:
        subprocess.run(["umount", str(out)], capture_output=True)
    assert code == 2, output
    assert len(output.strip().splitlines()) == 1 and output.startswith("error:"), output
    assert (out / "T.traj.json").read_bytes() == saved


@pytest.mark.slow
def test_postgres_checkpoints_resume_after_kills_between_writes_and_checkpoint_rows(tmp_path: Path) -> None:
    from pg_server import postgres_server

    with postgres_server() as url:
        for hit in (5, 12):
            root = tmp_path / f"hit{hit}"
            root.mkdir()
            repo, args = setup_run(root)
            args += ["--checkpoint", url, "--thread-id", f"T{hit}"]
            code, output = finish(llm_ide(args, root, f"checkpoint.writes={hit}"))
            assert code == -signal.SIGKILL, output
            code, output = rerun(args, root)
            assert code == 0, output
            (root / "out" / "T.traj.json").write_bytes((root / "out" / f"T{hit}.traj.json").read_bytes())
            traj = assert_complete_run(root, repo)
            assert not any(o["observation"].startswith(STOPPED) for o in traj["operations"])


def test_output_folder_deleted_mid_run_is_one_line_and_the_rerun_resumes(tmp_path: Path) -> None:
    """The folder (checkpoint database included) is deleted while the second command runs: the run ends
    `interrupted` with one line, the folder recreated with what the checkpoint holds; the rerun finishes the run with
    each command's effect once."""
    repo, args = setup_run(tmp_path, WAITING_STEPS)
    first = llm_ide(args, tmp_path)
    wait_for(repo / "waiting", first)
    shutil.rmtree(tmp_path / "out")
    (repo / "go").touch()
    code, output = finish(first)
    assert code == 1, output
    assert "Traceback" not in output and "Error" not in output
    said = " ".join(output.split())  # the console wraps long lines
    assert said.count(f"the output folder {tmp_path / 'out'} was deleted while the run ran: it is recreated") == 1
    saved = trajectory(tmp_path)
    assert saved["info"]["exit_status"] == "interrupted" and saved["info"]["n_operations"] == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        ".gitignore",
        "T.calls.jsonl.gz",
        "T.checkpoint.sqlite",
        "T.patch",
        "T.traj.json",
    ]  # fmt: skip  (recreated as a new output folder is: ignored by git)
    # the scripted model's place in its script went with the folder: the rerun's model answers from where the run is
    write_script(tmp_path / "script.yaml", [reflect(False, "two"), act("Done.", "submit")])
    code, output = rerun(args, tmp_path)
    assert code == 0, output
    traj = trajectory(tmp_path)
    assert [o["thought"] for o in traj["operations"]] == ["First.", "Wait.", "Done."]
    assert [c["index"] for c in traj["model_calls"]] == list(range(3))
    assert (repo / "trail.txt").read_text() == "one\ntwo\n"


def test_a_run_whose_folder_was_deleted_says_the_command_that_resumes_it(tmp_path: Path) -> None:
    """A run given no --thread-id (its id made from the time) said "run the same command again to resume": that
    command starts a new run under a new id. The command it prints resumes it."""
    repo, args = setup_run(tmp_path, WAITING_STEPS)
    args = args[: args.index("--thread-id")] + args[args.index("--thread-id") + 2 :]
    first = llm_ide(args, tmp_path)
    wait_for(repo / "waiting", first)
    shutil.rmtree(tmp_path / "out")
    (repo / "go").touch()
    code, output = finish(first)
    assert code == 1 and "same command" not in output, output
    said = " ".join(output.split())
    recreated = "it is recreated with the run's checkpoint, calls and trajectory, and the run can resume from them"
    assert f"was deleted while the run ran: {recreated}" in said, output
    printed = output.splitlines()[-1]
    assert printed.startswith("llm-ide run ") and "--thread-id run-" in printed, output
    write_script(tmp_path / "script.yaml", [reflect(False, "two"), act("Done.", "submit")])
    code, again = rerun(shlex.split(printed)[1:], tmp_path)
    assert code == 0 and "submitted" in again, again
    assert (repo / "trail.txt").read_text() == "one\ntwo\n"
