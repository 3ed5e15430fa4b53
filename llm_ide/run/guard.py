"""What must hold before a run touches its thread: one process per thread id, one run at a time changing a repository
in place, and saved state that agrees with itself (a thread with a trajectory is never restarted from scratch over
it)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from llm_ide.environments.views import UNHOOKED
from llm_ide.errors import ThreadMismatchError, UsageError


class RunStateError(UsageError):
    """The run cannot start: another process holds its thread, or its saved state is unusable (one line)."""


class NewThreadSaid(UsageError):
    """A thread that cannot go on as asked: its line names the door's way to a new thread (the Python API's, a new
    `run_id`, by default; `said`: another door's)."""

    def __init__(self, head: str, tail: str = "") -> None:
        self.parts = (head, tail)
        super().__init__(self.said("a new `run_id`"))

    def said(self, new: str) -> str:
        return f"{self.parts[0]}{new}{self.parts[1]}"


class AnotherTask(NewThreadSaid, ThreadMismatchError):
    """The thread id is a run of another task."""


@contextmanager
def thread_lock(output_dir: Path, run_id: str) -> Iterator[Path]:
    """An exclusive lock on the thread id, held for the whole run; the lock file names the holder's PID."""
    path = output_dir / f"{run_id}.lock"
    try:
        handle = path.open("a+", encoding="utf-8")
    except OSError as error:
        raise RunStateError(f"{output_dir} cannot be written ({error.strerror}): nothing was run") from None
    with held(handle, lambda holder: f"thread {run_id} is already being run by process {holder} (lock file {path})"):
        yield path


@contextmanager
def repo_lock(repo: Path | None, in_place: bool) -> Iterator[None]:
    """One run at a time changes a repository in place (two would each take the other's edits into its patch): an
    exclusive lock on its path, held for the whole run (the lock file: in the user's cache, named by the path)."""
    if repo is None or not in_place:
        yield
        return
    repo = Path(repo).resolve()
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llm-ide" / "locks"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = (folder / f"repo-{hashlib.sha256(bytes(repo)).hexdigest()[:20]}.lock").open("a+", encoding="utf-8")
    except OSError:
        yield  # nowhere to lock in: the thread's own lock still holds
        return
    advice = "wait for it to end, or give this run a clone or a git worktree of its own"
    with held(handle, lambda holder: f"repository {repo} is being changed by another run (process {holder}); {advice}"):
        yield


class AnotherRepository(UsageError):
    """A thread resumed in another repository than the one it started in: its line names the door's option for the
    repository and for a new thread (the Python API's by default; `said`: another door's)."""

    def __init__(self, run_id: str, started: str, repo: Path, base: str, given: str, instead: str) -> None:
        self.parts = (run_id, started, repo, base)
        super().__init__(self.said(given, instead))

    def said(self, given: str, instead: str) -> str:
        run_id, started, repo, base = self.parts
        return (
            f"thread {run_id} started in {started}; {given} {repo} is another repository (no commit {base[:12]}, "
            f"the thread's base): give the thread's repository (or a clone of it), or {instead}"
        )


ANEW = "a new `run_id` or `output_dir`"  # the Python API's way to run a task anew


class FinishedBefore(str):
    """What a thread that had already finished says, given again: its result comes again, and what continues it or
    runs the task anew, in the Python API's words (`said`: another door's)."""

    head: str

    def said(self, anew: str) -> str:
        return f"{self.head}{anew} runs the task anew"


def finished_before(run_id: str, status: str, hint: str = "") -> FinishedBefore:
    """`hint`: what continues it (", "-ended), before the way to run the task anew."""
    head = f"run {run_id} had already finished ({status}): its result again; {hint}"
    phase = FinishedBefore(f"{head}{ANEW} runs the task anew")
    phase.head = head
    return phase


def check_same_repository(
    run_id: str, values: dict[str, Any], repo: Path | None, given: str = "`repo`", instead: str = "a new `run_id`"
) -> None:
    """A thread resumed in another repository than the one it started in (its base commit is none of that
    repository's commits): AnotherRepository naming both (`given`, `instead`: in the words of the door used).
    Another checkout of the same one (a clone, a worktree, a retry on another node) goes on."""
    started, base = values.get("repo") or "", values.get("base_commit")
    if repo is None or not started or not base or Path(started).resolve() == Path(repo).resolve():
        return
    if not git_fails(repo, "rev-parse", "--git-dir") and git_fails(repo, "cat-file", "-e", f"{base}^{{commit}}"):
        raise AnotherRepository(run_id, started, repo, base, given, instead)


def went_on_with(run_id: str, field: str, started: Any, given: Any) -> str:
    """What a resumed run says when given another model (endpoint, config) than its thread started with: it goes on
    with the one given now (an endpoint's or a config's value unsaid: it may hold a credential)."""
    if field == "model":
        return f"run {run_id} started with model {started}: it goes on with model {given}, the one given now"
    return f"run {run_id} goes on with the `{field}` given now, not the one it started with"


def git_fails(repo: Path, *args: str) -> bool:
    return (
        subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=os.environ | UNHOOKED).returncode != 0
    )


@contextmanager
def held(handle: IO[str], refused: Callable[[str], str]) -> Iterator[None]:
    """An exclusive flock on the open file `handle`, which names the holder's PID while it holds it; taken already,
    a RunStateError says `refused(holder's PID)`."""
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise RunStateError(refused(holder)) from None
    try:
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
        except OSError:
            pass  # a full disk: the lock holds all the same, only the holder's PID is not told
        yield
    finally:
        with suppress(OSError):
            handle.seek(0)
            handle.truncate()
        fcntl.flock(handle, fcntl.LOCK_UN)
        with suppress(OSError):
            handle.close()


def saved_trajectory(path: Path) -> dict[str, Any] | None:
    """The trajectory's `info` (None when there is no file); a file that cannot be read gives `{"unreadable": …}`."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        info = json.loads(data)["info"]
        if not isinstance(info, dict):
            raise TypeError("info is not an object")
        return info
    except (ValueError, KeyError, TypeError) as error:
        return {"unreadable": f"{type(error).__name__}: {error}"}


def has_work(info: dict[str, Any] | None, calls_path: Path) -> bool:
    """Whether a restart would lose anything: a run that ended before its first model call (e.g. its environment
    never came up) has nothing to lose and starts again."""
    if calls_path.exists() and calls_path.stat().st_size > 0:
        return True
    if info is None:
        return False
    calls = (info.get("model_stats") or {}).get("api_calls") if isinstance(info.get("model_stats"), dict) else 0
    return bool(info.get("unreadable") or info.get("n_operations") or calls)


def check_saved_state(
    *, has_checkpoint: bool, state_operations: int, trajectory: Path, calls: Path, checkpoint: str
) -> None:
    """Refuse to start over a trajectory whose checkpoint is gone or behind it (emptied, truncated, WAL lost)."""
    info = saved_trajectory(trajectory)
    if not has_checkpoint:
        if has_work(info, calls):
            raise RunStateError(
                f"{checkpoint} holds no state for this thread but {trajectory.name} records a run: refusing to "
                "restart over it (was the checkpoint emptied or its WAL lost?); move the run's files away to start "
                "afresh"
            )
        return
    if info is not None and not info.get("unreadable") and int(info.get("n_operations") or 0) > state_operations:
        raise RunStateError(
            f"{checkpoint} is behind the trajectory ({state_operations} < {info['n_operations']} operations; was its "
            f"WAL lost?): refusing to resume over {trajectory.name}"
        )
