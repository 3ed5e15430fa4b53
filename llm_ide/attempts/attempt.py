"""The `attempt` node: one run of the agent graph at the task, from the base commit in a fresh environment (docker:
its own container; local: its own git worktree), as its own thread with its own checkpoints."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.attempts.context import AttemptsContext, attempt_store, local_worktree, summarize
from llm_ide.attempts.state import AttemptRecord, AttemptTask
from llm_ide.composition import attempt_model
from llm_ide.environments import capabilities
from llm_ide.errors import ExitStatus, LlmIdeError
from llm_ide.priced import apart_priced, cost_text, run_priced
from llm_ide.run.single import Driver
from llm_ide.run.spent import spent_apart, trajectory_info
from llm_ide.terminal import plural


class AttemptUnfinished(LlmIdeError):
    """An attempt stopped before it finished (a model error, an error of ours): the run stops too and resumes it."""

    def __init__(self, message: str, status: ExitStatus) -> None:
        super().__init__(message)
        self.exit_status = status


def attempt(state: AttemptTask, runtime: Runtime[AttemptsContext]) -> dict[str, Any]:
    ctx = runtime.context
    index = state["index"]
    request = ctx.request
    settings = ctx.settings.merged({"attempts": {"max": 1}}, origin="attempts")
    repo = request.repo
    environment = request.environment or settings.environment.type
    if not capabilities(environment).ephemeral and repo is not None:  # the repository itself: a worktree each
        base = state.get("base_commit")
        if not base:
            raise LlmIdeError(f"{repo}: attempts in the local environment need a git repository with a commit")
        repo = local_worktree(ctx, index, base)
    given, known = ctx.settings.attempts, state.get("known", 0)  # in parallel, a run that had attempts: those alone
    ctx.emit(f"attempt {index} of {known if given.parallel and known else given.max}")
    attempt_request = replace(
        request,
        task=state["task"],
        model=attempt_model(request.model, str(index)),
        settings=settings,
        output_dir=ctx.attempt_dir(index),
        run_id=ctx.attempt_id(index),
        repo=repo,
        environment=environment,
        checkpoint=attempt_store(request.checkpoint),
        cost_budget=ctx.budget,
        carried_lessons=tuple(state.get("carried_lessons") or ()),
        intents=None,  # each attempt's own, in its folder
    )
    told = ctx.listeners  # the caller's: each attempt's model calls, commands and questions too
    listeners = replace(told, on_event=streamed(ctx, index, getattr(runtime, "stream_writer", None)))
    driver = Driver(attempt_request, listeners)
    result = contextvars.Context().run(driver.run)  # a thread of its own, not a child of this graph's run
    if not result.exit_status.finished:
        raise AttemptUnfinished(
            f"attempt {index} stopped with {result.exit_status} ({result.error or 'see its trajectory'})",
            result.exit_status,
        )
    info = trajectory_info(result.trajectory_path)
    apart = spent_apart(info)  # its navigator's
    record = AttemptRecord(
        index=index,
        run_id=result.run_id,
        exit_status=str(result.exit_status),
        submission=result.submission,
        cost=float(result.model_stats.get("cost", 0.0)),
        cost_apart=apart["cost"],
        api_calls=int(result.model_stats.get("api_calls", 0)),
        trajectory=str(relative(result.trajectory_path, request.output_dir)),
        error=result.error,
        score=None,
        reasons="",
        **summarize(ctx.settings, result.trajectory_path),
    )
    own_log = ctx.attempt_dir(index) / f"{result.run_id}.log"  # as the run's output folder was given: one to open
    lines = plural(result.submission.count(chr(10)), "patch line")
    calls = plural(record["api_calls"] + apart["api_calls"], "call")
    cost = cost_text(record["cost"] + record["cost_apart"], run_priced(info), apart_priced(info))
    spent = f"{lines}, {cost}, {calls}"
    ctx.emit(f"attempt {index}: {result.exit_status}", f"{spent}; its log: {own_log}")
    return {"attempts": [record]}


def streamed(ctx: AttemptsContext, index: int, writer: Any) -> Callable[[Any], None]:
    """The agent's steps, to the run's listeners and to the graph's `custom` stream (LangGraph Studio,
    langgraph_sdk, `stream`)."""
    outer = contextvars.copy_context()  # where the writer finds this node's run (the agent runs in a context apart)

    def on_event(event: Any) -> None:
        if event.kind in ("step", "end") and writer is not None:
            status = str(event.exit_status or "")
            outer.run(
                writer,
                {
                    "attempt": index,
                    "kind": event.kind,
                    "step": event.step,
                    "action": event.action,
                    "cost": event.cost,
                    "exit_status": status,
                },
            )
        ctx.forward(event)

    return on_event


def relative(path: Path, root: Path) -> Path:
    return path.relative_to(root) if path.is_relative_to(root) else path
