"""LangGraph Studio (`langgraph dev`): the graph factory that langgraph.json points at.

The server calls `graph` for every run (and for schema and state reads). A run's resources — environment, tools,
model — are built from the graph input by its first node and closed when the server leaves the factory's context,
on every exit path. An error of ours ends the run with its exit status and the message in the state's `error`; the
final state carries the patch (`submission`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shutil
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config, get_stream_writer
from langgraph.errors import GraphBubbleUp
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import StateSnapshot

from llm_ide.calls import CallProgress
from llm_ide.composition import compose
from llm_ide.config import ConfigError, Settings, deep_merge, load_config, register_config_secrets
from llm_ide.environments import capabilities
from llm_ide.environments.live import CommandProgress
from llm_ide.environments.tools_cache import cache_in_use
from llm_ide.errors import LIMITS, LlmIdeError, UsageError, ended
from llm_ide.graph import build_graph
from llm_ide.inputs import GRAPH, StudioInput, input_config_error, require_inputs, unknown_field
from llm_ide.keep import FolderKeep
from llm_ide.navigator.variant import Navigator
from llm_ide.run.guard import repo_lock, went_on_with
from llm_ide.run.preflight import preflight
from llm_ide.run.served import ServedGraph
from llm_ide.run.setup import build_context
from llm_ide.run.single import going_on, past_its_limit
from llm_ide.sampling.variant import Sampling
from llm_ide.secrets import redact
from llm_ide.variant import AgentContext, Variant, Variants
from llm_ide.workspace.lifecycle import baseline_notes, open_environment
from llm_ide.workspace.patch import extract_patch

log = logging.getLogger("llm_ide.studio")
Node = Callable[..., dict[str, Any]]
EVERY = 0.25  # seconds between two events of a streaming reply (its text joined meanwhile)


def model_event(progress: CallProgress) -> dict[str, Any]:
    """A model call's progress as a stream event (JSON) for Studio clients."""
    rate = None if progress.rate is None else round(progress.rate, 2)
    return {
        "event": "model",
        "kind": progress.kind,
        "model": progress.model,
        "seconds": round(progress.seconds, 2),
        "prompt_tokens": progress.prompt_tokens,
        "output_tokens": progress.output_tokens,
        "tokens_per_second": rate,
        "text": progress.text,
    }


class Progress:
    """What the run is doing as custom stream events (`stream_mode="custom"`): each model call (`event: model`, its
    tokens so far, their rate, the reply's text as it comes, joined into an event every EVERY seconds), each of
    the agent's commands (`event: command`, its latest output lines and seconds so far), and what the command line
    says on its console (`event: note`: the run's setting up, its baseline, warnings such as a model call's retry)."""

    def __init__(self) -> None:
        self.writer: Callable[[Any], None] | None = None  # the stream of the node under way
        self.pending = ""
        self.told = 0.0
        self.lock = threading.Lock()

    def write(self, event: dict[str, Any]) -> None:
        if self.writer is not None:
            self.writer(event)

    def model(self, progress: CallProgress) -> None:
        with self.lock:
            self.pending += progress.text
            now = time.monotonic()
            if progress.kind == "text" and now - self.told < EVERY:
                return
            text, self.pending, self.told = self.pending, "", now
        self.write({**model_event(progress), "text": text})

    def command(self, progress: CommandProgress) -> None:
        self.write(progress.as_event())

    def note(self, text: str) -> None:
        log.info("%s", text)
        self.write({"event": "note", "level": "warning" if text.startswith("warning:") else "info", "text": text})


class StreamWarnings(logging.Handler):
    """The model's and the environment's warnings (a call's retry and why, an unsandboxed command), as the command
    line shows them: a note event in the stream of the run whose node logged it (outside a run: only logged)."""

    def __init__(self, name: str) -> None:
        super().__init__(logging.WARNING)
        self.set_name(name)

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(RuntimeError):  # no graph run in this context
            get_stream_writer()({"event": "note", "level": "warning", "text": redact(record.getMessage())})


WARNINGS = StreamWarnings("llm_ide.studio.stream")
for logger in map(logging.getLogger, ("llm_ide.models", "llm_ide.environment")):
    if all(handler.get_name() != WARNINGS.get_name() for handler in logger.handlers):  # the server loads this file
        logger.addHandler(WARNINGS)  # once per graph of langgraph.json: one handler, or each warning comes thrice


def thread_folder(thread: str) -> Path:
    """Where a thread's models keep what they need between the server's runs of it (a scripted model's place)."""
    folder = Path(tempfile.gettempdir()) / "llm-ide-studio" / re.sub(r"[^A-Za-z0-9._-]", "-", thread)[:120]
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


class StudioRun:
    """The resources of one server run, built on first use from the graph input."""

    def __init__(self, variants: list[Variant], defaults: dict[str, Any] | None = None) -> None:
        self.ctx: AgentContext | None = None
        self.failed: LlmIdeError | None = None  # the preflight's line: every later node of the run ends with it
        self.base: str | None = None
        self.variants = variants  # the graph's: its settings' others are not drawn, so not run
        self.defaults = defaults or {}  # settings under the input's `config` (the navigator graph: a human navigator)
        self.folder: Path | None = None  # the thread's models' (kept while the thread may go on)
        self.ended = False
        self.ended_before: bool | None = None  # the thread had ended before this server run (known at its first node)
        self.progress = Progress()
        self.held = contextlib.ExitStack()  # the repository's lock, while the run changes it in place
        self.building = threading.Lock()  # a set-up under way: what it opens is closed with the run
        self.closed = False
        self.anew: dict[str, Any] = {}  # a thread going on where it stopped: the fields it is given anew

    def context(self, state: dict[str, Any]) -> AgentContext:
        if self.failed is not None:
            raise self.failed
        with self.building:
            if self.closed:
                raise LlmIdeError("the run was stopped")
            if self.ctx is None:
                try:
                    self.ctx = self._build(state)
                except UsageError as error:  # a bad input: said once, not checked again by the nodes that follow
                    self.failed = error
                    raise
            return self.ctx

    def settings(self, state: dict[str, Any]) -> Settings:
        values = deep_merge(self.defaults, dict(state.get("config") or {}))
        try:
            return load_config(values.pop("base", "default"), variants=self.variants, **values)
        except ConfigError as error:
            raise input_config_error(error) from None

    def _build(self, state: dict[str, Any]) -> AgentContext:
        require_inputs(state)
        run_id = thread_id()
        said = [went_on_with(run_id, key, state.get(key), value) for key, value in self.anew.items()]
        state = {**state, **self.anew}  # as the command line's run given another --model or --config
        settings = self.settings(state)
        repo = Path(state["repo"]).expanduser().resolve()
        variants = compose(settings, self.variants, from_settings=False)
        task, base_url = state["task"], state.get("base_url")
        preflight(state["model"], settings, base_url=base_url, repo=repo, task=task, variants=variants, names=GRAPH)
        register_config_secrets(settings)
        for line in said:
            self.progress.note(line)
        self.held.enter_context(repo_lock(repo, not capabilities(settings.environment.type).ephemeral))
        self.held.enter_context(cache_in_use(bool(settings.environment.tools)))
        self.progress.note("starting environment")
        self.folder = thread_folder(run_id)  # a resumed thread's scripted models go on where they were
        known = state.get("base_commit")  # as the command line opens it: its notes, the base kept, its future removed
        env, self.base = open_environment(settings, repo, run_id, None, self.folder, known, None, self.progress.note)
        try:
            for note in [] if known or not self.base else baseline_notes(env, self.base):
                self.progress.note(note)
            if settings.environment.tools:
                self.progress.note("installing tools")
            self.ctx = build_context(
                settings=settings,
                model_spec=state["model"],
                base_url=state.get("base_url"),
                run_id=run_id,
                env=env,
                variants=variants,
                on_model_call=self.progress.model,
                on_command=self.progress.command,
                keep=FolderKeep(self.folder),
            )
        except BaseException:
            env.close()
            self.held.close()
            raise
        return self.ctx

    def patch(self) -> str:
        if self.ctx is None or not self.base:
            return ""
        try:
            return extract_patch(self.ctx.codebase.env, self.base, self.ctx.settings.patch)
        except LlmIdeError as error:
            log.error("patch extraction failed: %s", error)
            return ""

    def close(self) -> None:
        """What the run opened, closed; a set-up under way (a run cancelled meanwhile: its node's thread goes on)
        ends first."""
        with self.building:
            self.closed = True
        if self.ctx is not None:
            self.ctx.codebase.env.close()
        self.held.close()
        if self.ended and self.folder is not None:  # the thread is done: nothing of it is kept
            shutil.rmtree(self.folder, ignore_errors=True)
            with contextlib.suppress(OSError):  # the last thread's: the folder of them all goes too
                self.folder.parent.rmdir()


def thread_id() -> str:
    return str(get_config().get("configurable", {}).get("thread_id", "studio"))


def bind(node: Node, run: StudioRun) -> Node:
    """`node` with the run's context; an error of ours becomes the run's exit status and message; a run that ends
    gets its patch."""

    def studio_node(state: dict[str, Any], runtime: Runtime) -> dict[str, Any]:
        run.progress.writer = runtime.stream_writer
        if run.ended_before is None:
            run.ended_before = bool(state.get("exit_status"))
        if run.ended_before:  # its outcome stays as it is: nothing is set up or run again
            return {}
        try:
            ctx = run.context(state)
            update = node(state, runtime.override(context=ctx))
        except LlmIdeError as error:  # no driver to resume it here: any error of ours ends the run
            log.error("%s: %s", error.exit_status, error)
            update = ended(error)
        except (ValueError, RuntimeError, GraphBubbleUp):
            raise  # the server shows their message to the client; an interrupt() waits for the resume
        except Exception as error:
            raise RuntimeError(f"{type(error).__name__}: {error}") from error
        if not state.get("base_commit") and run.base:
            update["base_commit"] = run.base
        if update.get("exit_status") and not state.get("exit_status"):
            update["submission"] = run.patch()
            run.ended = update["exit_status"] not in LIMITS  # done, unless a higher limit makes it go on
        return update

    studio_node.__name__ = node.__name__
    return studio_node


class StudioGraph(ServedGraph):
    """The graph as served: a run given a task on a thread that holds one is checked before anything of it is
    written. Another task is refused (ThreadMismatchError), the thread left as it was, its state readable; its own
    task on a thread cut mid-step (what Studio's form sends again) resumes the step where it stopped, as `null` does,
    and on a thread stopped at a limit its `config` no longer reaches goes on from the next step."""

    def __init__(self, *, studio_run: StudioRun | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.studio_run = studio_run

    def seen(self, input: Any) -> None:
        if isinstance(input, dict) and self.studio_run is not None and (error := unknown_field(input, StudioInput)):
            self.studio_run.failed = error  # an input applied: its first node ends the run with the line

    def anew(self, fields: dict[str, Any]) -> None:
        if self.studio_run is not None:
            self.studio_run.anew = fields

    def resumed(self, thread: StateSnapshot, input: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
        """As a served graph's (run/served.py); a thread stopped at a limit its `config` no longer reaches goes on
        from its next step (the update that lets it)."""
        given, _ = super().resumed(thread, input)
        kept = thread.values.get("task")
        if kept and not thread.next and self.studio_run is not None and thread.values.get("exit_status") in LIMITS:
            with contextlib.suppress(LlmIdeError):  # a bad `config`: the run says it, as for any thread
                if past_its_limit(thread.values, self.studio_run.settings(input).agent):
                    return None, going_on(config=input.get("config") or {})
        return given, None


@asynccontextmanager
async def served(variants: list[Variant], defaults: dict[str, Any] | None = None) -> AsyncIterator[CompiledStateGraph]:
    """The graph of one server call with `variants`; what its run opened is closed when the server is done with it."""
    run = StudioRun(variants, defaults)
    try:
        wrap = lambda node: bind(node, run)  # noqa: E731
        drawn = Variants(tuple(variants))
        built = build_graph(context_schema=None, wrap=wrap, variants=drawn, input_schema=StudioInput)
        yield StudioGraph.of(built, studio_run=run)
    finally:
        await asyncio.to_thread(run.close)  # off the server's event loop


@asynccontextmanager
async def graph(config: RunnableConfig) -> AsyncIterator[CompiledStateGraph]:
    """The agent's graph, served (`llm-ide` in langgraph.json)."""
    async with served([]) as compiled:
        yield compiled


@asynccontextmanager
async def sampled_graph(config: RunnableConfig) -> AsyncIterator[CompiledStateGraph]:
    """The graph with action sampling at `act` (`llm-ide-sampled`; `sampling` in the input's `config`: k, choice…)."""
    async with served([Sampling()]) as compiled:
        yield compiled


@asynccontextmanager
async def navigator_graph(config: RunnableConfig) -> AsyncIterator[CompiledStateGraph]:
    """The graph with the navigator (issue 12); a human navigator unless the input's config says otherwise: a person
    approves or denies a gated action, or passes a review, by resuming the thread (`Command(resume={"approved":
    false, "reason": "..."})`)."""
    async with served([Navigator("human")], {"navigator": {"mode": "human"}}) as compiled:
        yield compiled
