"""`run_attempts`: the Python API (and `llm-ide run`/`swebench` with `attempts.max` > 1) of the attempts graph.

The run's own thread (`<output>/<id>.attempts.sqlite`) holds the finished attempts, reviews and choice; each attempt
is a thread of its own (`<output>/attempt<N>/<id>-attempt<N>.*`): a killed run resumes the attempt that was under way
from its last step, and the finished ones are kept."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_ide.attempts.context import AttemptsContext, TaskBudget, git, remove_worktrees
from llm_ide.attempts.graph import build_attempts_graph
from llm_ide.attempts.trajectory import Read, write_combined
from llm_ide.composition import Settings
from llm_ide.environments import capabilities
from llm_ide.errors import ExitStatus, LlmIdeError, Terminated, UsageError, ending
from llm_ide.resources import CostBudget
from llm_ide.run.single import RunEvent, RunResult
from llm_ide.run.thread import opened, start
from llm_ide.secrets import redacted
from llm_ide.variant import Variant

log = logging.getLogger("llm_ide.run")


@dataclass
class AttemptsResult(RunResult):
    attempts: list[dict[str, Any]] = field(default_factory=list)
    chosen: int | None = None


def run_attempts(
    task: str,
    *,
    model: str,
    settings: Settings,
    output_dir: Path,
    run_id: str,
    repo: Path | None = None,
    environment: str | None = None,
    image: str | None = None,
    base_url: str | None = None,
    checkpoint: str | None = None,
    task_vars: dict[str, Any] | None = None,
    on_event: Callable[[RunEvent], None] | None = None,
    cost_budget: CostBudget | None = None,
    variants: Iterable[Variant] = (),
) -> AttemptsResult:
    """Up to `settings.attempts.max` attempts at the task, reviewed, one patch chosen; resumes the thread `run_id`.
    Each attempt runs with its settings' variants and `variants`, whose facts go to the reviewer and the chooser."""
    output_dir, settings = start(output_dir, run_id, settings, environment)
    kind = settings.environment.type
    in_place = not capabilities(kind).ephemeral  # the repository itself: each attempt in a git worktree of it
    if in_place and repo is None:
        raise UsageError(f"attempts in the {kind} environment need a repository (--repo PATH)")
    budget = TaskBudget(settings.attempts.cost_limit or None, cost_budget)
    ctx = AttemptsContext(
        settings=settings, model=model, run_id=run_id, output_dir=output_dir,
        repo=Path(repo).resolve() if repo else None, environment=kind, image=image, base_url=base_url,
        checkpoint=checkpoint, task_vars=task_vars, on_event=on_event, budget=budget, variants=list(variants),
    )  # fmt: skip
    info = {"run_id": run_id, "model": model, "config": redacted(settings.model_dump(mode="json"))}
    path = output_dir / f"{run_id}.traj.json"
    read: Read = {}  # the attempts' trajectories, read again only when they change
    thread = {"configurable": {"thread_id": run_id}}
    with opened(output_dir, run_id, task, checkpoint, f"{run_id}.attempts.sqlite", build_attempts_graph) as opening:
        graph, snapshot, values, resumed = opening.graph, opening.snapshot, opening.values, opening.resumed
        spent = sum(r.get("cost", 0.0) for r in values.get("attempts", [])) + sum(
            c.get("cost", 0.0) for c in values.get("calls", [])
        )
        CostBudget.add(budget, spent)  # a resumed task's earlier spending (the batch's budget counted it before)
        if resumed and values.get("exit_status") and not snapshot.next:
            return finish(path, values, info, read)
        if resumed:
            done = [r["index"] for r in values.get("attempts", [])]
            ctx.emit(f"resuming run {run_id}: attempts {done or 'none'} finished are kept")
        base = values.get("base_commit") or (git(ctx.repo, "rev-parse", "--verify", "HEAD") if in_place else "")
        inputs = None if resumed else {"task": task, "repo": str(repo or ""), "model": model, "base_commit": base}
        try:
            written = None
            with stop_on_signals(ctx.stop):
                for state in graph.stream(inputs, thread, context=ctx, stream_mode="values", durability="sync"):
                    values = dict(state)
                    progress = [(r["index"], r.get("score")) for r in values.get("attempts", [])]
                    if progress != written:  # a finished attempt or a review: the trajectory shows it
                        write_combined(path, values, info, read)
                        written = progress
        except LlmIdeError as error:
            status, info["error"] = ending(error)
            values = {**values, "exit_status": str(status), "error": info["error"]}
            log.error("%s: %s", error.exit_status, error)
        result = finish(path, values, info, read)
        if result.exit_status.finished and in_place:
            remove_worktrees(ctx, [r["index"] for r in values.get("attempts", [])])
    return result


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Ctrl-C, SIGTERM, SIGHUP also tell the attempts under way in the graph's other threads to stop (LangGraph waits
    for them before the interrupt goes on): each ends `interrupted` at its next step, its environment removed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

    def handler(signum: int, frame: Any) -> None:
        stop.set()
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
    status = ExitStatus(values.get("exit_status") or ExitStatus.ERROR)
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
