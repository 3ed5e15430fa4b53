"""`run_attempts`: the Python API (and `llm-ide run`/`swebench` with `attempts.max` > 1) of the attempts graph.

The run's own thread (`<output>/<id>.attempts.sqlite`) holds the finished attempts, reviews and choice; each attempt
is a thread of its own (`<output>/attempt<N>/<id>-attempt<N>.*`): a killed run resumes the attempt that was under way
from its last step, and the finished ones are kept."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llm_ide.attempts.context import AttemptsContext, attempts_database, git, remove_worktrees, uncommitted
from llm_ide.attempts.graph import build_attempts_graph
from llm_ide.attempts.limits import accepted, more_attempts, past_their_limits, task_spent
from llm_ide.attempts.trajectory import Read, write_combined
from llm_ide.budget import CostBudget
from llm_ide.calls import CallListener
from llm_ide.composition import compose
from llm_ide.credentials import redacted
from llm_ide.environments import capabilities
from llm_ide.environments.live import CommandListener
from llm_ide.errors import LIMITS, LlmIdeError, Terminated, UsageError, ended, ending, status_of
from llm_ide.run.guard import (
    NewThreadSaid,
    RunStateError,
    check_same_repository,
    finished_before,
    has_work,
    repo_lock,
    saved_trajectory,
)
from llm_ide.run.request import RunRequest, check_request, request_of
from llm_ide.run.single import Driver, Listeners, RunEvent, RunResult
from llm_ide.run.thread import Thread, opened, start

log = logging.getLogger("llm_ide.run")


@dataclass
class AttemptsResult(RunResult):
    attempts: list[dict[str, Any]] = field(default_factory=list)
    chosen: int | None = None


def run_attempts(
    task: str,
    *,
    on_event: Callable[[RunEvent], None] | None = None,
    on_model_call: CallListener | None = None,
    ask: Callable[[dict[str, Any]], Any] | None = None,
    on_command: CommandListener | None = None,
    **fields: Any,
) -> RunResult:
    """The Python API of a run at a task with attempts: `run_task`'s arguments (`fields`: those of `RunRequest`; the
    listeners are told each attempt's events, model calls, commands and questions); its thread is resumed."""
    listeners = Listeners(on_event, on_model_call, ask, on_command)
    request = request_of(task, fields)
    check_request(request)
    return run_at_task(request, listeners)


def run_at_task(request: RunRequest, listeners: Listeners) -> RunResult:
    """A run at a task, however it is asked for: `attempts.max` attempts reviewed and one chosen (each attempt a run of
    the agent with the settings' variants and the request's), or, with one attempt, the agent's run itself."""
    compose(request.settings, request.variants)  # a combination that cannot work: refused before anything starts
    attempted = request.settings.attempts.max > 1  # type: ignore[attr-defined]
    check_kind(request.output_dir, request.run_id, attempted)
    if not attempted:
        return Driver(request, listeners).run()
    output_dir, settings = start(request.output_dir, request.run_id, request.settings, request.environment)
    request = replace(request, output_dir=output_dir, settings=settings)
    kind = settings.environment.type
    in_place = not capabilities(kind).ephemeral  # the repository itself: each attempt in a git worktree of it
    if in_place and request.repo is None:
        raise UsageError(f"attempts in the {kind} environment need a repository (`repo`)")
    repo = Path(request.repo).resolve() if request.repo else None
    ctx = AttemptsContext(replace(request, repo=repo, environment=kind), listeners)
    info = {"run_id": request.run_id, "model": request.model, "config": redacted(settings.model_dump(mode="json"))}
    database = attempts_database(request.run_id)
    with (
        opened(output_dir, request.run_id, request.task, request.checkpoint, database, build_attempts_graph) as thread,
        repo_lock(repo, in_place),
    ):
        check_same_repository(request.run_id, thread.values, repo)
        try:
            return Attempts(ctx, thread, info, in_place).run()
        finally:
            ctx.close()


@dataclass
class Attempts:
    """The attempts graph of one run streamed: the combined trajectory rewritten as attempts finish and reviews come."""

    ctx: AttemptsContext
    thread: Thread
    info: dict[str, Any]
    in_place: bool
    read: Read = field(default_factory=dict)  # the attempts' trajectories, read again only when they change

    def run(self) -> AttemptsResult:
        ctx, values, request = self.ctx, self.thread.values, self.ctx.request
        path = request.output_dir / f"{request.run_id}.traj.json"
        spent = task_spent(request.output_dir, request.run_id, values)
        CostBudget.add(ctx.budget, spent)  # a resumed task's earlier spending (the batch's budget counted it before)
        again = self.thread.resumed and bool(values.get("exit_status")) and not self.thread.snapshot.next
        if again and not self.goes_on(values):
            return finish(path, values, self.info, self.read)
        if self.thread.resumed and not again:
            done = [r["index"] for r in values.get("attempts", [])]
            ctx.emit(f"resuming run {request.run_id}: attempts {done or 'none'} finished are kept")
        try:
            self.stream(path, again)
        except LlmIdeError as error:
            status, self.info["error"] = ending(error)
            self.thread.values.update(ended(error))
            log.error("%s: %s", status, error)
        except KeyboardInterrupt as interrupt:  # the trajectory says so; the thread resumes where it was
            status, self.info["error"] = ending(interrupt)
            write_combined(path, {**self.thread.values, "exit_status": status}, self.info, self.read)
            raise
        values = self.thread.values
        result = finish(path, values, self.info, self.read)
        if result.exit_status.finished and self.in_place:
            remove_worktrees(ctx, [r["index"] for r in values.get("attempts", [])])
        return result

    def goes_on(self, values: dict[str, Any]) -> bool:
        """Whether a finished run given again goes on (attempts past their limits: `dispatch` reopens it); if not,
        it says its result comes again."""
        request, budget = self.ctx.request, self.ctx.budget
        spent = budget is not None and budget.exhausted
        if past_their_limits(request.output_dir, request.run_id, request.checkpoint, values, request.settings, spent):
            return True
        if not spent and more_attempts(values, request.settings):
            done, most = len(values.get("attempts", [])), request.settings.attempts.max
            self.ctx.emit(f"run {request.run_id} had finished: none of its {done} accepted, attempts to {most} follow")
            return True
        given = request.settings.attempts
        hint = "a higher limit continues the attempts stopped at one, " if values["exit_status"] in LIMITS else ""
        if not spent and not given.parallel and not accepted(values.get("attempts", []), given.accept_score):
            hint += "a higher attempts.max adds attempts, "
        self.ctx.emit(finished_before(request.run_id, values["exit_status"], hint))
        return False

    def stream(self, path: Path, again: bool = False) -> None:
        """The graph to its end (`again`: a finished run given its input again); the thread's values follow its
        state."""
        request, repo, values = self.ctx.request, self.ctx.request.repo, self.thread.values
        base = values.get("base_commit") or (git(repo, "rev-parse", "HEAD") if self.in_place and repo else "")
        if not self.thread.resumed and self.in_place and repo and (changed := uncommitted(repo)):
            left = (
                f"each attempt starts from commit {base[:12]} without them; commit them for the attempts to have them"
            )
            self.ctx.emit(f"warning: the repository has uncommitted changes ({changed}): {left}")
        inputs = {"task": request.task, "repo": str(repo or ""), "model": request.model, "base_commit": base}
        config = {"configurable": {"thread_id": request.run_id}}
        options = {"context": self.ctx, "stream_mode": "values", "durability": "sync"}
        written = None
        with stop_on_signals(self.ctx.halt):
            given = None if self.thread.resumed and not again else inputs
            for state in self.thread.graph.stream(given, config, **options):
                values.clear()
                values.update(state)
                progress = [(r["index"], r.get("score")) for r in values.get("attempts", [])]
                if progress != written:  # a finished attempt or a review: the trajectory shows it
                    write_combined(path, values, self.info, self.read)
                    written = progress


@contextmanager
def stop_on_signals(halt: Callable[[], None]) -> Iterator[None]:
    """Ctrl-C, SIGTERM, SIGHUP also tell the attempts under way in the graph's other threads to stop (LangGraph waits
    for them before the interrupt goes on): each ends `interrupted` at its next step (one in a silent command at once,
    the command ended), its environment removed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

    def handler(signum: int, frame: Any) -> None:
        halt()
        before = previous[signum]
        if callable(before):
            before(signum, frame)
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt
        else:
            raise Terminated(signum)

    for signum in previous:
        signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)


def finish(path: Path, values: dict[str, Any], info: dict[str, Any], read: Read) -> AttemptsResult:
    data = write_combined(path, values, info, read)
    status = status_of(values.get("exit_status"))
    return AttemptsResult(
        run_id=info["run_id"],
        exit_status=status,
        submission=values.get("submission", ""),
        trajectory_path=path,
        model_stats=data["info"]["model_stats"],
        error=values.get("error", info.get("error", "")),
        attempts=data["info"]["attempts"],
        chosen=values.get("chosen"),
    )


class AnotherKind(NewThreadSaid, RunStateError):
    """The thread id is a run of the other kind (with attempts or without) than it is resumed as."""


def check_kind(output_dir: Path, run_id: str, attempts: bool) -> None:
    """A thread id's run is resumed as the kind of run it was, with attempts or without, never started over as the
    other kind (over its trajectory and patch)."""
    trajectory, calls = output_dir / f"{run_id}.traj.json", output_dir / f"{run_id}.calls.jsonl.gz"
    info = saved_trajectory(trajectory) if output_dir.is_dir() else None  # (not a folder: the run says so)
    if info is None or info.get("unreadable") or ("attempts" in info) == attempts or not has_work(info, calls):
        return
    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    had = (config.get("attempts") or {}).get("max", "> 1") if "attempts" in info else 1
    kind = "with" if "attempts" in info else "without"
    raise AnotherKind(
        f"thread {run_id} is a run {kind} attempts ({trajectory}): resume it as it ran (attempts.max: {had}), or give "
    )
