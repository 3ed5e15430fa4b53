from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.types import Command

from llm_ide.calls import CallListener
from llm_ide.composition import compose
from llm_ide.errors import ExitStatus, LlmIdeError, OutputFolderLost, UsageError, ending
from llm_ide.faults import failpoint
from llm_ide.graph import build_graph
from llm_ide.resources import CostBudget
from llm_ide.run.checkpoint import prune
from llm_ide.run.guard import check_saved_state
from llm_ide.run.salvage import ensure_output, folder_lost, recreate_output, sqlite_path
from llm_ide.run.setup import build_context
from llm_ide.run.thread import ThreadMismatchError, opened, start
from llm_ide.run.trajectory import Recorder
from llm_ide.secrets import redact, redacted
from llm_ide.settings import CoreSettings
from llm_ide.state.graph_state import empty_usage
from llm_ide.variant import Variant
from llm_ide.workspace.intents import IntentLog
from llm_ide.workspace.lifecycle import (
    final_patch,
    latest_worktree_patch,
    open_environment,
    previous_submission,
    recover_submission,
)
from llm_ide.workspace.patch import baseline_notes

log = logging.getLogger("llm_ide.run")


@dataclass
class RunEvent:
    run_id: str
    kind: str
    phase: str = ""
    step: int = 0
    action: str = ""
    observation: str = ""
    cost: float = 0.0
    exit_status: ExitStatus | None = None
    tool: Any = None  # kind "tool": a llm_ide.tools.installer.ToolEvent
    thought: str = ""  # kind "step": the reasoning that chose the action
    tokens: int = 0  # kind "step": the run's tokens so far (input + output)


@dataclass
class RunResult:
    run_id: str
    exit_status: ExitStatus
    submission: str
    trajectory_path: Path
    model_stats: dict[str, Any]
    error: str = ""
    written: int = 0  # bytes the trajectory's rewrites and the calls log's records wrote in this process
    interrupt: dict[str, Any] | None = None  # the run awaits an answer (a person's): what it asks


def describe_action(node: Any) -> str:
    params = node.action_params
    match node.action_type:
        case "bash":
            return f"bash: {params.get('command', '')}"
        case "view":
            return f"view {params.get('path', '')}:{params.get('start_line', 1)}-{params.get('end_line', '')}"
        case "view_symbol":
            return f"view_symbol {params.get('path', '')} {params.get('symbol', '')}"
        case "search":
            return f"search {params.get('pattern', '')!r} {params.get('path', '')}".rstrip()
        case "edit" | "create":
            return f"{node.action_type} {params.get('path', '')}"
    return node.action_type


def run_task(
    task: str,
    *,
    model: str,
    settings: CoreSettings,
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
    intents: IntentLog | None = None,
    carried_lessons: list[str] | None = None,
    resume: Any = None,
    ask: Callable[[dict[str, Any]], Any] | None = None,
    variants: Iterable[Variant] = (),
    on_model_call: CallListener | None = None,
) -> RunResult:
    """Run the agent on one task until it submits or hits a limit; resume the thread `run_id` if it is unfinished.
    The run has the variants its settings ask for, and `variants` (e.g. a message channel to another agent). A variant
    that asks a person interrupts the graph: each question goes to `ask` (its return value is the answer); without it
    the run returns awaiting the answer (`ExitStatus.AWAITING_ANSWER`) with the question in `interrupt`, and `resume`
    carries the answer to the next call on the same thread. `on_model_call`: told of each model call as it happens."""
    if not task.strip():
        raise UsageError("the task is empty: say what the agent should do")
    composed = compose(settings, variants)  # a combination that cannot work is refused before anything starts
    output_dir, settings = start(output_dir, run_id, settings, environment)
    emit = on_event or (lambda event: None)
    info: dict[str, Any] = {
        "run_id": run_id,
        "model": model,
        "config": redacted(settings.model_dump(mode="json")),
        "exit_status": None,
        "submission": "",
    }
    database = f"{run_id}.checkpoint.sqlite"
    build = lambda saver: build_graph(saver, variants=composed)  # noqa: E731
    with opened(output_dir, run_id, task, checkpoint, database, build) as thread:
        spec, saver, graph, snapshot, values, resumed = (
            thread.spec, thread.saver, thread.graph, thread.snapshot, thread.values, thread.resumed
        )  # fmt: skip
        if spec != "memory":
            check_saved_state(
                has_checkpoint=resumed,
                state_operations=values.get("n_operations", 0),
                trajectory=output_dir / f"{run_id}.traj.json",
                calls=output_dir / f"{run_id}.calls.jsonl.gz",
                checkpoint=spec,
            )
        recorder = Recorder(output_dir, run_id, composed.record)  # the thread is ours, its state checked
        run = _Run(run_id, saver, recorder, emit, info, values, ask)
        if values.get("exit_status") and ExitStatus(values["exit_status"]).finished and not snapshot.tasks:
            return run.finished_before(settings, repo, image)
        status, submission, env = ExitStatus.ERROR, "", None
        base = values.get("base_commit") if resumed else None
        try:
            if resumed:
                done = values.get("n_operations", 0)
                emit(RunEvent(run_id, "phase", phase=f"resuming run {run_id} after step {done} (from its checkpoint)"))
            emit(RunEvent(run_id, "phase", phase="starting environment"))
            env, base = open_environment(
                settings, repo, run_id, image, output_dir, base, latest_worktree_patch(snapshot) if resumed else None,
                lambda phase: emit(RunEvent(run_id, "phase", phase=phase)),
            )  # fmt: skip
            for note in [] if resumed or base is None else baseline_notes(env, base):
                emit(RunEvent(run_id, "phase", phase=note))
            emit(RunEvent(run_id, "phase", phase="installing tools"))
            ctx = build_context(
                settings=settings,
                model_spec=model,
                run_id=run_id,
                base_url=base_url,
                env=env,
                base=base,
                record_call=recorder.record_call,
                cost_budget=cost_budget,
                task_vars=task_vars,
                variants=composed,
                intents=intents or IntentLog(output_dir / f"{run_id}.intents.jsonl"),
                on_tool_event=lambda event: emit(RunEvent(run_id, "tool", tool=event)),
                on_model_call=on_model_call,
            )
            state = "resumed" if resumed else "started"
            log.info("run %s %s (model %s, environment %s)", run_id, state, model, env.kind)
            if resumed:
                inputs = None if resume is None else Command(resume=resume)
            else:
                inputs = first_inputs(task, repo, model, base, ctx, carried_lessons)
            status = run.stream(graph, inputs, ctx)
            failpoint("run.ended")  # the graph ended; the patch and the trajectory's outcome are not saved yet
        except LlmIdeError as error:
            status, info["error"] = ending(error)
            log.error("%s: %s", status, error)
        except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM/SIGHUP (errors.Terminated)
            status, info["error"] = ending(interrupt)
            log.warning("%s", info["error"])
            raise
        except Exception as error:
            if output_dir.is_dir():
                status, info["error"] = ending(error)
                log.exception("run failed")
            else:  # what failed was a write into the deleted output folder
                status, info["error"] = ending(OutputFolderLost(folder_lost(output_dir)))
        finally:
            if env is not None:
                status, submission = closed(env, base, settings, values, status, info)
            run.tidy(settings, spec)
            result = run.finish(status, submission)
    return result


def first_inputs(
    task: str, repo: Path | None, model: str, base: str | None, ctx: Any, carried_lessons: list[str] | None
) -> dict[str, Any]:
    """A new thread's input: the task, and the worktree as the run found it."""
    inputs: dict[str, Any] = {"task": task, "repo": str(repo or ""), "model": model, "base_commit": base}
    if ctx.snapshot_patch is not None:
        inputs["worktree_patch"] = ctx.snapshot_patch()
    if carried_lessons:
        inputs["carried_lessons"] = list(carried_lessons)
    return inputs


def closed(
    env: Any, base: str | None, settings: CoreSettings, values: dict[str, Any], status: ExitStatus, info: dict
) -> tuple[ExitStatus, str]:
    """The run's patch taken from its environment, which is then closed; a lost patch is no result."""
    submission = ""
    try:
        submission = final_patch(env, base, settings, values)
    except Exception as error:  # the run's outcome must still be saved
        log.error("patch extraction failed: %s", error)
        if status.finished:  # an empty patch is not the result of a finished run
            status, info["error"] = ending(error)[0], f"patch extraction failed: {error}"
    env.close()
    return status, submission


@dataclass
class _Run:
    """One run's outputs while it streams: the latest state, the trajectory, the checkpoint pruning, the events."""

    run_id: str
    saver: Any
    recorder: Recorder
    emit: Callable[[RunEvent], None]
    info: dict[str, Any]
    values: dict[str, Any]
    ask: Callable[[dict[str, Any]], Any] | None = None
    interrupt: dict[str, Any] | None = None

    def stream(self, graph: Any, inputs: dict[str, Any] | None, ctx: Any) -> ExitStatus:
        steps = self.values.get("n_operations", 0)
        settings = ctx.settings.checkpoint
        prune_every = 0 if settings.keep_history else settings.prune_every
        thread = {"configurable": {"thread_id": self.run_id}}
        while True:
            self._stream_once(graph, inputs, thread, ctx, steps, prune_every)
            steps = self.values.get("n_operations", 0)
            pending = graph.get_state(thread).interrupts
            if not pending:
                return ExitStatus(self.values.get("exit_status") or ExitStatus.ERROR)
            question = pending[0].value
            if self.ask is None:
                self.interrupt = question
                return ExitStatus.AWAITING_ANSWER
            inputs = Command(resume=self.ask(question))

    def _stream_once(self, graph: Any, inputs: Any, thread: dict[str, Any], ctx: Any, steps: int, prune_every: int):
        for state in graph.stream(inputs, thread, context=ctx, stream_mode="values", durability="sync"):
            ensure_output(self.recorder.path.parent)
            if "__interrupt__" in state:
                continue
            self.values.clear()
            self.values.update(state)
            if state.get("n_operations", 0) <= steps:
                continue
            steps = state["n_operations"]
            if commit := getattr(self.saver, "commit", None):
                commit()
            self.recorder.write(state, self.info)
            if prune_every and steps % prune_every == 0:
                prune(self.saver, self.run_id)
            node, usage = state["operations"][-1], state.get("usage") or empty_usage()
            action, cost, tokens = describe_action(node), usage["cost"], usage["input_tokens"] + usage["output_tokens"]
            done = {"step": steps, "action": action, "observation": node.observation, "thought": node.thought}
            self.emit(RunEvent(self.run_id, "step", **done, cost=cost, tokens=tokens))
            log.info("step %d: %s (cost %.4f)", steps, action, cost)

    def finished_before(self, settings: CoreSettings, repo: Path | None, image: str | None) -> RunResult:
        """A thread that had already finished: its result again, its submission from its trajectory (or recovered)."""
        status = ExitStatus(self.values["exit_status"])
        log.info("run %s already finished (%s)", self.run_id, status)
        submission = previous_submission(self.recorder.path, status)
        if submission is None:
            status, submission = recover_submission(self.values, settings, repo, self.run_id, image, self.info)
        return self.finish(status, submission)

    def tidy(self, settings: CoreSettings, spec: str) -> None:
        """Old checkpoints pruned; an output folder deleted under the run recreated from what the run still holds."""
        if not settings.checkpoint.keep_history:
            try:
                prune(self.saver, self.run_id)
            except Exception as error:  # a full disk: the checkpoints stay as they are, still valid
                log.error("checkpoint pruning failed: %s", error)
        output_dir = self.recorder.path.parent
        if not output_dir.is_dir():
            recreate_output(output_dir, self.saver, sqlite_path(spec), self.recorder)

    def finish(self, status: ExitStatus, submission: str) -> RunResult:
        if not self.info.get("error") and self.values.get("error"):
            self.info["error"] = str(self.values["error"])  # e.g. which turn limit ended the run
        submission = redact(submission)  # a secret the agent wrote into a file never reaches preds.json
        if self.info.get("error"):
            self.info["error"] = redact(self.info["error"])
        self.info.update(exit_status=status, submission=submission)
        for attempt in range(2):  # the first may report an earlier background write's failure
            try:
                self.recorder.save(self.values, self.info)
                break
            except OSError as error:
                if attempt:
                    self.info.setdefault("error", f"the trajectory could not be saved: {error}")
                    log.error("trajectory not saved (%s); the last one written is kept", error)
        usage = dict(self.values.get("usage") or empty_usage())
        step = self.values.get("n_operations", 0)
        self.emit(RunEvent(self.run_id, "end", step=step, cost=usage["cost"], exit_status=status))
        log.info("run %s ended: %s", self.run_id, status)
        error = self.info.get("error", "")
        path, written = self.recorder.path, self.recorder.written
        return RunResult(self.run_id, status, submission, path, usage, error, written=written, interrupt=self.interrupt)


__all__ = ["CostBudget", "RunEvent", "RunResult", "ThreadMismatchError", "run_task"]
