"""What a run leaves and tells: its events, its trajectory written as it streams (each completed step saved and
told), the checkpoints pruned, and its result however it ends."""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_ide.errors import ExitStatus, OutputFolderLost, beside, status_of, usd
from llm_ide.priced import has_price
from llm_ide.run.call_log import added
from llm_ide.run.checkpoint import prune
from llm_ide.run.salvage import ensure_output, not_recreated, recreate_output, sqlite_path
from llm_ide.run.spent import spent_apart
from llm_ide.run.thread import Thread
from llm_ide.run.trajectory import Recorder
from llm_ide.secrets import redact
from llm_ide.settings import CoreSettings
from llm_ide.state.graph_state import empty_usage
from llm_ide.variant import AgentContext
from llm_ide.verdict import bad
from llm_ide.workspace.lifecycle import previous_submission, recover_submission

log = logging.getLogger("llm_ide.run")


LOOP_GC_THRESHOLD = 10_000  # allocations between the young generation's passes while the loop runs (Python's: 700)


@contextmanager
def settled_heap() -> Iterator[None]:
    """What is alive when a run's loop starts (the imports' modules and classes, the run's setup) kept out of the
    garbage collector's full passes until it ends: each pass then walks only what the loop made, not the ~200,000
    objects before it (a full pass took ~80 ms, several times per 100 steps). The young generation is collected every
    10,000 allocations, not 700: a step's short-lived objects die by their counts, not walked and promoted (the passes
    took ~0.6 ms a step, ~0.1 ms after). Both undone after; a heap its caller froze stays frozen (telling that walks
    what it froze: ~10 ms a run for 150,000 objects, nothing for a heap none froze)."""
    thresholds, ours = gc.get_threshold(), gc.get_freeze_count() == 0
    if ours:
        gc.freeze()
    gc.set_threshold(LOOP_GC_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if ours:
            gc.unfreeze()


@dataclass
class RunEvent:
    run_id: str
    kind: str
    phase: str = ""
    step: int = 0
    action: str = ""
    observation: str = ""
    cost: float = 0.0  # kinds "step", "end": the run's so far, what its variants paid apart too
    exit_status: ExitStatus | None = None
    tool: Any = None  # kind "tool": a llm_ide.tools.installer.ToolEvent
    thought: str = ""  # kind "step": the reasoning that chose the action
    tokens: int = 0  # kind "step": the run's tokens so far (input + output)
    rejected: tuple[int, int] | None = None  # kind "format_error": replies rejected in a row, agent.max_format_errors
    command: Any = None  # kind "command": an agent's command under way (llm_ide.environments.live.CommandProgress)


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
            return "bash: " + " ⏎ ".join(str(params.get("command", "")).splitlines())  # every line on the step's line
        case "view":
            start, end = params.get("start_line"), params.get("end_line")
            lines = "" if start is None and end is None else f":{start or 1}-{'' if end is None else end}"
            return f"view {params.get('path', '')}{lines}"
        case "view_symbol":
            return f"view_symbol {params.get('path', '')} {params.get('symbol', '')}"
        case "search":
            return f"search {params.get('pattern', '')!r} {params.get('path', '')}".rstrip()
        case "edit" | "create":
            return f"{node.action_type} {params.get('path', '')}"
    return node.action_type


@dataclass
class RunOutputs:
    """One run's outputs while it streams: the latest state, the trajectory, the checkpoint pruning, the events."""

    run_id: str
    thread: Thread
    recorder: Recorder
    info: dict[str, Any]
    emit: Callable[[RunEvent], None] = lambda event: None
    interrupt: dict[str, Any] | None = None
    steps: int = field(init=False)
    rejected: int = field(init=False)  # the replies rejected in a row so far

    def __post_init__(self) -> None:
        self.steps = self.values.get("n_operations", 0)
        self.rejected = self.values.get("format_errors", 0)

    @property
    def values(self) -> dict[str, Any]:
        return self.thread.values

    def stream(self, graph: Any, inputs: Any, config: dict[str, Any], ctx: AgentContext) -> None:
        """The graph streamed to its end or its next question; each completed step saved, pruned and told."""
        with settled_heap():
            self._stream(graph.stream(inputs, config, context=ctx, stream_mode="values", durability="sync"), ctx)

    def _stream(self, states: Iterator[dict[str, Any]], ctx: AgentContext) -> None:
        checkpoints = ctx.settings.checkpoint
        prune_every = 0 if checkpoints.keep_history else checkpoints.prune_every
        priced = has_price(ctx.model.name, ctx.settings.model.prices)  # else its cost is unknown, not $0
        for state in states:
            if "__interrupt__" in state:
                ensure_output(self.recorder.path.parent)
                continue
            self.values.clear()
            self.values.update(state)
            ensure_output(self.recorder.path.parent)  # (the state taken first: an error it ended with stays first)
            self.tell_rejected(state, ctx.settings.agent.max_format_errors)
            if state.get("n_operations", 0) <= self.steps:
                continue
            self.steps = state["n_operations"]
            if commit := getattr(self.thread.saver, "commit", None):
                commit()
            self.recorder.write(state, self.info)
            if prune_every and self.steps % prune_every == 0:
                prune(self.thread.saver, self.run_id)
            self.tell_failed(state["operations"])
            node, usage = state["operations"][-1], added(state.get("usage") or empty_usage(), spent_apart(state))
            action, cost, tokens = describe_action(node), usage["cost"], usage["input_tokens"] + usage["output_tokens"]
            done = {"step": self.steps, "action": action, "observation": node.observation, "thought": node.thought}
            self.emit(RunEvent(self.run_id, "step", **done, cost=cost, tokens=tokens))
            log.info("step %d: %s (cost %s)", self.steps, action, usd(cost) if priced else "unpriced")

    def tell_failed(self, operations: list[Any]) -> None:
        """The operation before the latest, told when its verdict (which came with the latest) made it a failed
        alternative: its lessons, else its summary."""
        if len(operations) > 1 and bad(previous := operations[-2]):
            lessons = previous.lessons or previous.summary
            self.emit(RunEvent(self.run_id, "verdict", step=previous.id + 1, observation=lessons))

    def tell_rejected(self, state: dict[str, Any], limit: int) -> None:
        """A reply that could not be used (one more format error in a row: a new `retry`), told as it happens, why."""
        errors, retry = state.get("format_errors", 0), state.get("retry") or {}
        if errors > self.rejected and retry:
            why = retry.get("error") or retry.get("message", "")
            step = state.get("n_operations", 0) + 1
            self.emit(RunEvent(self.run_id, "format_error", step=step, observation=why, rejected=(errors, limit)))
        self.rejected = errors

    def finished_before(self, settings: CoreSettings, repo: Path | None, image: str | None) -> RunResult:
        """A thread that had already finished: its result again, its submission from its trajectory (or recovered)."""
        status = status_of(self.values["exit_status"])
        log.info("run %s already finished (%s)", self.run_id, status)
        submission = previous_submission(self.recorder.path, status)
        if submission is None:
            status, submission = recover_submission(self.values, settings, repo, self.run_id, image, self.info)
        return self.finish(status, submission)

    def tidy(self, settings: CoreSettings, spec: str) -> None:
        """Old checkpoints pruned; an output folder deleted under the run recreated from what the run still holds."""
        if not settings.checkpoint.keep_history:
            try:
                prune(self.thread.saver, self.run_id)
            except Exception as error:  # a full disk: the checkpoints stay as they are, still valid
                log.error("checkpoint pruning failed: %s", error)
        output_dir = self.recorder.path.parent
        if not output_dir.is_dir():
            try:
                recreate_output(output_dir, self.thread.saver, sqlite_path(spec), self.recorder)
            except OSError as error:  # a file in its place, a parent made read-only: said with what ended the run
                self.info["error"] = not_recreated(output_dir, error, self.info.get("error", ""))

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
            except OSError as error:  # its record not saved: no finished run (the same command saves it, resumed)
                if attempt:
                    status = status if not status.finished else OutputFolderLost.exit_status
                    unsaved = f"the trajectory could not be saved: {error}"
                    self.info["error"] = beside(self.info.get("error", ""), unsaved)
                    log.error("trajectory not saved (%s); the last one written is kept", error)
        usage = self.recorder.paid(self.values)
        cost = usage["cost"] + spent_apart(self.values)["cost"]  # with what its variants paid apart
        self.emit(RunEvent(self.run_id, "end", step=self.values.get("n_operations", 0), cost=cost, exit_status=status))
        log.info("run %s ended: %s", self.run_id, status)
        error, path, written = self.info.get("error", ""), self.recorder.path, self.recorder.written
        return RunResult(self.run_id, status, submission, path, usage, error, written=written, interrupt=self.interrupt)
