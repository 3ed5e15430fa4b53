"""One run of the agent at a task, whoever asks for it (the command line, a batch, a driver of several runs, a replay,
Python): its request, the driver that owns it (model set-up, the event stream, how an error ends it and with which
exit status) and its result. Drivers of several runs at a task make each of them with this one."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from langgraph.types import Command

from llm_ide import verdict
from llm_ide.calls import CallListener
from llm_ide.composition import compose
from llm_ide.credentials import redacted
from llm_ide.environments import capabilities
from llm_ide.environments.base import Environment
from llm_ide.environments.live import CommandListener, CommandProgress
from llm_ide.environments.tools_cache import cache_in_use
from llm_ide.errors import (
    LIMITS,
    AwaitingAnswer,
    ExitStatus,
    LlmIdeError,
    UsageError,
    beside,
    ending,
    status_of,
)
from llm_ide.graph import CORE, ENDING, after_render, build_graph
from llm_ide.keep import FolderKeep
from llm_ide.kills import IntentLog, failpoint
from llm_ide.nodes.update_activity import run_limit
from llm_ide.run.checkpoint import store_lost, without_password
from llm_ide.run.guard import check_same_repository, check_saved_state, finished_before, repo_lock, went_on_with
from llm_ide.run.outputs import RunEvent, RunOutputs, RunResult
from llm_ide.run.request import RunRequest, check_listeners, check_request, request_of
from llm_ide.run.salvage import folder_gone
from llm_ide.run.setup import build_context
from llm_ide.run.thread import Thread, ThreadMismatchError, opened, start, thread_database
from llm_ide.run.trajectory import Recorder
from llm_ide.run.usage import check_output_folder, check_task
from llm_ide.settings import AgentSettings
from llm_ide.variant import AgentContext, Clock, Variants
from llm_ide.workspace.lifecycle import (
    baseline_notes,
    final_patch,
    latest_worktree_patch,
    open_environment,
)
from llm_ide.workspace.putback import moved_notes
from llm_ide.workspace.submodules import warn_submodules

log = logging.getLogger("llm_ide.run")


@dataclass(frozen=True)
class Listeners:
    """Who is told what a run does: its events (`on_event`; an agent's command as it runs is a `command` event too),
    each model call as it happens (`on_model_call`), each command as it runs (`on_command`), and a question a
    variant asks a person (`ask` returns the answer; without it the run returns awaiting it)."""

    on_event: Callable[[RunEvent], None] | None = None
    on_model_call: CallListener | None = None
    ask: Callable[[dict[str, Any]], Any] | None = None
    on_command: CommandListener | None = None

    def __post_init__(self) -> None:
        check_listeners(vars(self))

    def emit(self, event: RunEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def command_listener(self, run_id: str, step: Callable[[], int]) -> CommandListener | None:
        """What tells a run's commands as they run: to `on_command`, and as `command` events of the step under way
        (`step()`: its number, as its `step` event will say)."""
        if self.on_event is None and self.on_command is None:
            return None

        def tell(progress: CommandProgress) -> None:
            if self.on_command is not None:
                self.on_command(progress)
            self.emit(RunEvent(run_id, "command", step=step(), command=progress))

        return tell


def run_task(
    task: str,
    *,
    on_event: Callable[[RunEvent], None] | None = None,
    on_model_call: CallListener | None = None,
    ask: Callable[[dict[str, Any]], Any] | None = None,
    on_command: CommandListener | None = None,
    **fields: Any,
) -> RunResult:
    """The Python API of one run: the agent at `task` until it submits or reaches a limit (`fields`: those of
    `RunRequest`); the thread `run_id` is resumed when it is unfinished. Checked first as the command line checks a
    run (llm_ide/run/preflight.py): a problem raises a UsageError of one line, before anything is set up."""
    listeners = Listeners(on_event, on_model_call, ask, on_command)
    request = request_of(task, fields)
    check_request(request)
    return Driver(request, listeners).run()


@dataclass
class Driver:
    """One run of the agent graph: its thread opened (resumed, never started over), its environment and models set
    up, the graph streamed (each step saved and told), and however it ends (a limit, an error, Ctrl-C, a question
    for a person) its exit status and its patch saved with its trajectory."""

    request: RunRequest
    listeners: Listeners = field(default_factory=Listeners)

    def run(self) -> RunResult:
        request = self.request
        check_task(request.task)
        variants = compose(request.settings, request.variants)  # a combination that cannot work: refused now
        check_output_folder(request.output_dir, request.repo)
        output_dir, settings = start(request.output_dir, request.run_id, request.settings, request.environment)
        request = replace(request, output_dir=output_dir, settings=settings)
        build = lambda saver: build_graph(saver, variants=variants)  # noqa: E731
        database = thread_database(request.run_id)
        every = settings.checkpoint.keep_history
        in_place = not capabilities(settings.environment.type).ephemeral
        with (
            opened(output_dir, request.run_id, request.task, request.checkpoint, database, build, every) as thread,
            repo_lock(request.repo, in_place),
            cache_in_use(bool(settings.environment.tools)),
        ):
            if request.resume is not None and not thread.resumed:  # a mistyped id: no new run in its place
                raise UsageError(f"run {request.run_id}: no saved run in {output_dir} awaits the answer given (resume)")
            check_same_repository(request.run_id, thread.values, request.repo)
            if thread.resumed and (started := thread.values.get("model")) and started != request.model:
                said = went_on_with(request.run_id, "model", started, request.model)
                self.listeners.emit(RunEvent(request.run_id, "phase", phase=said))
            if thread.spec != "memory":
                check_saved_state(
                    has_checkpoint=thread.resumed,
                    state_operations=thread.values.get("n_operations", 0),
                    trajectory=output_dir / f"{request.run_id}.traj.json",
                    calls=output_dir / f"{request.run_id}.calls.jsonl.gz",
                    checkpoint=without_password(thread.spec),
                )
            thread.values.setdefault("task", request.task)  # in the trajectory of a run stopped before its first input
            values, reopened = thread.values, beyond_its_limit(thread, request)
            outputs = RunOutputs(
                request.run_id, reopened or thread, Recorder(output_dir, request.run_id, variants.info), self.info()
            )
            outputs.emit = self.listeners.emit
            finished = values.get("exit_status") and status_of(values["exit_status"]).finished
            done = reopened is None and finished and not thread.snapshot.tasks
            if reopened is not None or done:
                outputs.emit(RunEvent(request.run_id, "phase", phase=finished_phase(request.run_id, values, reopened)))
            if done:
                return outputs.finished_before(settings, request.repo, request.image)
            return Stream(replace(self, request=request), reopened or thread, outputs, variants).run()

    def info(self) -> dict[str, Any]:
        return {
            "run_id": self.request.run_id,
            "model": self.request.model,
            "config": redacted(self.request.settings.model_dump(mode="json")),
            "exit_status": None,
            "submission": "",
        }


def unrecorded_time(trajectory: Path, thread: Thread) -> float:
    """What a stopped run spent after its last checkpoint (its trajectory's `info.elapsed` past its state's): the
    resumed run counts it, so a step cut by Ctrl-C or an error is not lost from its time."""
    if not thread.resumed:
        return 0.0
    try:
        info = json.loads(trajectory.read_text(encoding="utf-8")).get("info") or {}
        return max(0.0, float(info.get("elapsed") or 0.0) - float(thread.values.get("elapsed") or 0.0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0.0


@dataclass
class Stream:
    """The run under way: its environment opened, its context built, its graph streamed until it ends."""

    driver: Driver
    thread: Thread
    outputs: RunOutputs
    variants: Variants
    ctx: AgentContext | None = None  # the run's context, once built

    def say(self, phase: str) -> None:
        self.outputs.emit(RunEvent(self.driver.request.run_id, "phase", phase=phase))

    def run(self) -> RunResult:
        request, outputs = self.driver.request, self.outputs
        status, env, base = status_of(None), None, None
        try:
            env, base = self.open()
            status = self.stream(self.context(env, base), base)
            failpoint("run.ended")  # the graph ended; the patch and the trajectory's outcome are not saved yet
        except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM/SIGHUP (errors.Terminated)
            status, outputs.info["error"] = ending(interrupt)
            log.warning("%s", outputs.info["error"])
            self.count_time()
            self.save_unsaved(interrupt)
            raise
        except Exception as error:
            self.count_time()
            self.save_unsaved(error)
            lost = not outputs.recorder.path.parent.is_dir()  # what failed was a write into the deleted folder
            said = folder_gone(request.output_dir, outputs.values) if lost else store_lost(self.thread.spec, error)
            status, outputs.info["error"] = ending(said or error)
            log.log(logging.ERROR, "%s: %s", status, said or error, exc_info=not isinstance(said or error, LlmIdeError))
        finally:
            submission = ""
            if env is not None:
                status, submission = self.closed(env, base, status)
            outputs.tidy(request.settings, self.thread.spec)
            result = outputs.finish(status, submission)
        return result

    def count_time(self) -> None:
        """A run that ends without passing `update_activity` (a model error, Ctrl-C, a crash): its time since its last
        completed step (the model's and the commands') is counted in its trajectory's `info.elapsed` too."""
        if self.ctx is not None:
            since = time.monotonic() - self.ctx.clock.mark
            self.outputs.info["elapsed"] = round(self.outputs.values.get("elapsed", 0.0) + since, 3)

    def save_unsaved(self, error: BaseException) -> None:
        """The update the node an error or Ctrl-C cut short owes (its `unsaved`: what it spent), saved in the state: its
        checkpoint and trajectory; the thread's next step stays next."""
        update = getattr(error, "unsaved", None)
        if not update:
            return
        self.outputs.values.update(update)
        graph, config = self.thread.graph, {"configurable": {"thread_id": self.driver.request.run_id}}
        try:
            goto = list(graph.get_state(config).next)
            graph.update_state(config, Command(update=update, goto=goto), as_node=ENDING)
        except Exception as failure:  # the checkpoint's database lost: the trajectory still holds it
            log.error("what the step spent is not in its checkpoint: %s", failure)

    def open(self) -> tuple[Any, str | None]:
        request, thread = self.driver.request, self.thread
        if thread.resumed:
            done = thread.values.get("n_operations", 0)
            where = f"after step {done}" if done else "before its first step"
            self.say(f"resuming run {request.run_id} {where} (its checkpoint)")
        self.say("starting environment")
        base = thread.values.get("base_commit") if thread.resumed else None
        snapshot = latest_worktree_patch(thread.snapshot) if thread.resumed else None
        env, base = open_environment(
            request.settings, request.repo, request.run_id, request.image, request.output_dir, base, snapshot, self.say
        )
        try:  # (failed or interrupted here, the run has no environment to close: this closes it)
            for note in [] if base is None else (moved_notes if thread.resumed else baseline_notes)(env, base):
                self.say(note)
        except BaseException:
            env.close()
            raise
        return env, base

    def context(self, env: Environment, base: str | None) -> AgentContext:
        request, listeners = self.driver.request, self.driver.listeners
        if request.settings.environment.tools:
            self.say("installing tools")
        ctx = build_context(
            settings=request.settings,
            model_spec=request.model,
            run_id=request.run_id,
            base_url=request.base_url,
            env=env,
            base=base,
            record_call=self.outputs.recorder.calls.record,
            cost_budget=request.cost_budget,
            task_vars=request.task_vars,
            variants=self.variants,
            intents=request.intents or IntentLog(request.output_dir / f"{request.run_id}.intents.jsonl"),
            on_tool_event=lambda event: listeners.emit(RunEvent(request.run_id, "tool", tool=event)),
            on_model_call=listeners.on_model_call,
            on_command=listeners.command_listener(
                request.run_id, lambda: self.outputs.values.get("n_operations", 0) + 1
            ),
            keep=request.keep or FolderKeep(request.output_dir, f"{request.run_id}."),
            clock=Clock(time.monotonic() - unrecorded_time(self.outputs.recorder.path, self.thread)),
            kept=request.output_dir / request.run_id,
            say=self.say,
        )
        self.ctx = ctx
        log.info(
            "run %s %s (model %s, environment %s)",
            request.run_id,
            "resumed" if self.thread.resumed else "started",
            request.model,
            env.kind,
        )
        return ctx

    def stream(self, ctx: AgentContext, base: str | None) -> ExitStatus:
        request = self.driver.request
        # The saves are made on this thread (run/inline_saves.py); what else LangGraph hands off (a super-step's second
        # task) goes to one worker, not a pool woken for each.
        graph, config = self.thread.graph, {"configurable": {"thread_id": request.run_id}, "max_concurrency": 1}
        if self.thread.resumed:
            upgraded(graph, config)
            inputs = None if request.resume is None else Command(resume=request.resume)
        else:
            inputs = first_inputs(request, base, ctx)
        while True:
            self.outputs.stream(graph, inputs, config, ctx)
            pending = graph.get_state(config).interrupts
            if not pending:
                return status_of(self.outputs.values.get("exit_status"))
            if self.driver.listeners.ask is None:
                self.outputs.interrupt = pending[0].value
                return ending(AwaitingAnswer())[0]
            inputs = Command(resume=self.driver.listeners.ask(pending[0].value))

    def closed(self, env: Any, base: str | None, status: ExitStatus) -> tuple[ExitStatus, str]:
        """The run's patch taken from its environment, which is then closed; a lost patch is no result."""
        submission = ""
        try:
            submission = final_patch(env, base, self.driver.request.settings, self.outputs.values)
            if base:
                warn_submodules(env)
        except Exception as error:  # the run's outcome must still be saved
            log.error("patch extraction failed: %s", error)
            submission = getattr(error, "patch", "")  # a repository lost under the run (RepositoryLost): its snapshot
            status = ending(error)[0] if status.finished else status  # an empty patch is no finished run's result
            first, info = self.outputs.info.get("error") or self.outputs.values.get("error", ""), self.outputs.info
            info["error"] = beside(first, f"patch extraction failed: {error}")  # its first cause stays said (resumable)
        env.close()
        return status, submission


def upgraded(graph: Any, config: dict[str, Any]) -> None:
    """A thread checkpointed by an earlier version goes on: one whose step went from `render_context` straight to
    `act` (which judged and placed too) through `reflect` and `branch`, as if `render_context` had just run; one
    stopped mid-step with the step's verdict kept apart, with the verdict committed (llm_ide/verdict.py) and its next
    node still next (a node routes by the `Command` it returns: an update as a node routes where the update says)."""
    snapshot = graph.get_state(config)
    if snapshot.next == ("act",) and snapshot.values.get("pending") is None:
        graph.update_state(config, Command(goto=after_render(snapshot.values)), as_node="render_context")
    saved = graph.checkpointer.get_tuple(config)
    if saved is not None and (committed := verdict.kept_apart(saved.checkpoint["channel_values"])):
        goto = list(graph.get_state(config).next)  # as the node that commits a verdict, which has no edge of its own
        graph.update_state(config, Command(update=committed, goto=goto), as_node=ENDING)


def going_on(**update: Any) -> Command:
    """The update as ENDING that makes a thread stopped at a limit go on from its next step (with `update`)."""
    return Command(update={"exit_status": None, "error": "", **update}, goto=next(iter(CORE)))


def past_its_limit(values: dict[str, Any], agent: AgentSettings, spent: bool = False) -> bool:
    """Whether a thread stopped at a limit that `agent`'s limits no longer reach (a higher step limit, 0 for none;
    `spent`: a cost limit it shares is): it can go on from its next step, its exit status cleared (`going_on`)."""
    steps, elapsed = values.get("n_operations", 0), values.get("elapsed", 0.0)
    return values.get("exit_status") in LIMITS and run_limit(agent, values, steps, elapsed, spent) is None


def beyond_its_limit(thread: Thread, request: RunRequest) -> Thread | None:
    """A thread that stopped at a limit the request's settings no longer reach, reopened; None for any other."""
    spent = request.cost_budget is not None and request.cost_budget.exhausted
    if thread.snapshot.tasks or not past_its_limit(thread.values, request.settings.agent, spent):
        return None
    config = {"configurable": {"thread_id": request.run_id}}
    thread.graph.update_state(config, going_on(), as_node=ENDING)
    snapshot = thread.graph.get_state(config)
    return replace(thread, snapshot=snapshot, values=dict(snapshot.values))


def finished_phase(run_id: str, values: dict[str, Any], reopened: Thread | None) -> str:
    """What a finished thread's run says: it goes on past the limit it had reached, or gives its result again."""
    status = values["exit_status"]
    if reopened is not None:
        said = values.get("error") or status
        return f"run {run_id} had stopped at a limit ({said}): it goes on, under the limits given now"
    return finished_before(run_id, status, "a higher limit continues it, " if status in LIMITS else "")


def first_inputs(request: RunRequest, base: str | None, ctx: AgentContext) -> dict[str, Any]:
    """A new thread's input: the task, and the worktree as the run found it."""
    inputs: dict[str, Any] = {"task": request.task, "repo": str(request.repo or ""), "model": request.model}
    inputs["base_commit"] = base
    if ctx.snapshot_patch is not None:
        inputs["worktree_patch"] = ctx.snapshot_patch()
    if request.carried_lessons:
        inputs["carried_lessons"] = list(request.carried_lessons)
    return inputs


__all__ = ["Driver", "Listeners", "RunEvent", "RunRequest", "RunResult", "ThreadMismatchError", "run_task"]
