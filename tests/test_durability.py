"""Kills at exact moments (failpoints) and resumes: nothing lost, nothing done twice, never a restart."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from agent_script import act
from conftest import killed_in_command
from durability_support import RERUN, WAITING_STEPS, finish, llm_ide, mark, rerun, setup_run, trajectory, wait_for

THOUGHTS = ["First.", "Second.", "Third.", "Fourth.", "Done."]
STOPPED = "The run was stopped while this"
HALF_WAY = "echo two-a >> trail.txt; touch waiting; while [ ! -f go ]; do sleep 0.05; done; echo two-b >> trail.txt"


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
