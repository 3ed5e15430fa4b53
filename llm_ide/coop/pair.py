"""One CooperBench pair as a LangGraph graph: prepare (the folder and the checkout) → plan (the planning graph) →
execute (the agents, each running the agent graph — in coop with the variant that reads the other's messages) → evaluate
(eval.json). The graph keeps no checkpoint of its own: each phase is durable by itself (planning.sqlite, every agent's
checkpoint, the patches), so a rerun resumes where the pair stopped. `graph` is the factory langgraph.json points at."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Required

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from pydantic import ValidationError
from typing_extensions import TypedDict

from llm_ide.config import load_config
from llm_ide.coop.phases import check_models, execute_phase, grade, plan_phase, prepare
from llm_ide.coop.planning import build_planning_graph, merge_dict
from llm_ide.coop.record import CoopRun
from llm_ide.coop.settings import CoopSettings, load_coop_settings
from llm_ide.coop.task import CoopError, CoopTask, check_source, default_source, load_task
from llm_ide.environments import environment_kind
from llm_ide.errors import LlmIdeError, UsageError, ended
from llm_ide.fileio import atomic_write
from llm_ide.graph import build_graph
from llm_ide.inputs import InputError, Names, check_fields, unknown_field
from llm_ide.messages.variant import Messages
from llm_ide.run.served import ServedGraph
from llm_ide.run.usage import refuse_a_file
from llm_ide.settings import CoreSettings
from llm_ide.variant import Variants

Node = Callable[..., dict[str, Any]]


class PairInput(TypedDict, total=False):
    """What a pair starts from: the run (task, pair, setting, model, k, repo_source, …: `CoopRun`), the output folder
    and (LangGraph Studio) agent settings overrides like the agent graph's `config` (`base` names the base config)
    and coop settings overrides (`coop`, over coop.yaml)."""

    run: Required[dict[str, Any]]
    output: str
    config: dict[str, Any]
    coop: dict[str, Any]


class PairState(PairInput, total=False):
    exit_status: str  # served (Studio): an error of ours ends the run, as the agent graph's (`error` its line)
    error: str
    folder: str
    plans: dict[str, str]
    patches: list[str]
    seconds: Annotated[dict[str, float], merge_dict]
    result: dict[str, Any]


@dataclass
class PairContext:
    """The pair's settings and progress callback; LangGraph Studio gives none: the defaults are loaded."""

    settings: CoreSettings | None = None
    coop: CoopSettings | None = None
    on_event: Callable[[str, Any], None] | None = None
    evaluate: bool = True
    started: dict[str, float] = field(default_factory=dict)

    def loaded(self, state: PairState) -> tuple[CoreSettings, CoopSettings]:
        if self.settings is None:
            values = dict(state.get("config") or {})
            self.settings = load_config(values.pop("base", "default"), **values)
        if self.coop is None:
            self.coop = load_coop_settings(values=state.get("coop"))
        return self.settings, self.coop


def context_of(runtime: Runtime[PairContext]) -> PairContext:
    return runtime.context if isinstance(runtime.context, PairContext) else PairContext()


NAMES = Names(  # what the graph calls the run's inputs, in a line that asks for one
    base_url="the graph input's `run.base_url`",
    model="the graph input's `run.model`",
    output="the graph input's `output`",
)
PAIR = '{"task": folder, "pair": [i, j], "setting", "model", "repo_source"}'
NO_SOURCE = "no repository source: give one (a local clone or a git bundle; none is beside the dataset, repos/*.bundle)"
INPUTS = {
    "run": (dict, f"a mapping of the pair ({PAIR})"),
    "output": (str, "the folder of the pair's files, as text"),
    "config": (dict, "a mapping of agent settings, as a --config file holds"),
    "coop": (dict, "a mapping of coop settings, as coop.yaml holds"),
}


def spec(state: PairState) -> tuple[CoopRun, CoopTask]:
    """The pair and its task from the graph's input (LangGraph Studio's form too): a missing or wrong field is an
    InputError of one line naming it, before anything runs."""
    check_fields(dict(state), INPUTS, {"run": f"the pair: {PAIR}"})
    if unknown := sorted(set(state["run"]) - set(CoopRun.model_fields)):
        raise InputError(f"the graph input's `run.{unknown[0]}`: unknown field (use {', '.join(CoopRun.model_fields)})")
    given = dict(state["run"])
    guessed = not given.get("repo_source") and isinstance(given.get("task"), str)
    if guessed:  # as `coop run` without --repo-source: the bundle beside the dataset
        given["repo_source"] = str(default_source(Path(given["task"])) or "")
    try:
        run = CoopRun.model_validate(given)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InputError(f"the graph input's `run.{where}`: {first['msg'].lower()}") from None
    field = "task"
    try:
        task = load_task(run.task)
        field = "repo_source"
        if guessed and not given["repo_source"]:
            raise CoopError(NO_SOURCE)
        field = "pair"
        if run.pair[0] == run.pair[1]:
            raise CoopError(f"{list(run.pair)}: give two different features")
        task.feature(run.pair[0]), task.feature(run.pair[1])
        field = "environment"
        environment_kind(run.environment or "local")
    except UsageError as error:
        raise InputError(f"the graph input's `run.{field}`: {error}") from None
    return run, task


def check_before_anything(state: PairState, run: CoopRun, ctx: PairContext) -> None:
    """The settings, the models, the repository source and the output folder, checked before the folder and the
    checkout (each mistake named by its field)."""
    try:
        settings, _ = ctx.loaded(state)
    except UsageError as error:
        field, said = "config" if ctx.settings is None else "coop", str(error).split(": ", 1)[-1]
        raise InputError(f"the graph input's `{field}`: {said}") from None
    checks: list[tuple[str, Callable[[], None]]] = [
        ("config" if settings.navigator.mode == "human" else "run.model",
         lambda: check_models(run.model, settings, run.base_url, NAMES)),
        ("run.repo_source", lambda: check_source(run.repo_source, "")),
        ("output", lambda: refuse_a_file(Path(state.get("output") or "runs/coop"), "")),
    ]  # fmt: skip
    for field, check in checks:
        try:
            check()
        except LlmIdeError as error:
            raise InputError(f"the graph input's `{field}`: {str(error).strip()}") from None


def build_pair_graph(
    checkpointer: Any = None,
    context_schema: type[PairContext] | None = PairContext,
    wrap: Callable[[Node], Node] = lambda node: node,
) -> CompiledStateGraph:
    planning = build_planning_graph()  # its checkpointer (planning.sqlite) is attached per pair
    agent = build_graph(variants=Variants((Messages(),)))  # as drawn: each agent's run adds its settings' variants

    def prepare_pair(state: PairState, runtime: Runtime[PairContext]) -> dict[str, Any]:
        run, task = spec(state)
        ctx = context_of(runtime)
        check_before_anything(state, run, ctx)
        folder, _ = prepare(run, task, Path(state.get("output") or "runs/coop"), NAMES.output)
        return {"folder": str(folder)}

    def plan(state: PairState, runtime: Runtime[PairContext]) -> dict[str, Any]:
        (run, task), ctx = spec(state), context_of(runtime)
        settings, coop = ctx.loaded(state)
        folder = Path(state["folder"])
        with timed(folder, "planning"):
            plans = plan_phase(run, task, folder, folder / "repo", settings, coop, planning)
        return {"plans": plans, "seconds": {"planning": phase_seconds(folder)["planning"]}}

    def execute(state: PairState, runtime: Runtime[PairContext]) -> dict[str, Any]:
        (run, task), ctx = spec(state), context_of(runtime)
        settings, coop = ctx.loaded(state)
        folder, emit = Path(state["folder"]), ctx.on_event or (lambda agent, event: None)
        assert agent is not None  # the execution's graph, drawn inside this node (each run composes its own)
        with timed(folder, "execution"):
            patches = execute_phase(run, task, folder, folder / "repo", state["plans"], settings, coop, emit)
        return {"patches": patches, "seconds": {"execution": phase_seconds(folder)["execution"]}}

    def evaluate(state: PairState, runtime: Runtime[PairContext]) -> dict[str, Any]:
        (run, task), ctx = spec(state), context_of(runtime)
        folder = Path(state["folder"])
        if ctx.evaluate and (kept := graded(folder, run)) is not None:
            return {"result": kept, "seconds": kept.get("seconds", {})}  # a finished pair rerun: its tests not again
        result: dict[str, Any] = {"setting": str(run.setting), "k": run.k, "pair": list(run.pair)}
        if ctx.evaluate:
            with timed(folder, "evaluation"):
                result.update(grade(run, task, folder, state["patches"]))
        seconds = phase_seconds(folder)
        if not ctx.evaluate:
            seconds.pop("evaluation", None)  # (an earlier run's: not this result's)
        result["seconds"] = seconds
        atomic_write(folder / "eval.json", json.dumps(result, indent=2, ensure_ascii=False) + "\n")
        return {"result": result, "seconds": seconds}

    builder = StateGraph(PairState, context_schema=context_schema, input_schema=PairInput)
    for name, node in (("prepare", prepare_pair), ("plan", plan), ("execute", execute), ("evaluate", evaluate)):
        builder.add_node(name, wrap(node))
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "plan")
    builder.add_edge("plan", "execute")
    builder.add_edge("execute", "evaluate")
    builder.add_edge("evaluate", END)
    return builder.compile(checkpointer=checkpointer, name="coop-pair")


SECONDS = "seconds.json"


def phase_seconds(folder: Path) -> dict[str, float]:
    """The seconds each phase of the pair took so far, over every run of it."""
    return {phase: round(value, 2) for phase, value in spent_so_far(folder).items()}


def spent_so_far(folder: Path) -> dict[str, float]:
    try:
        return {phase: float(value) for phase, value in json.loads((folder / SECONDS).read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


@contextmanager
def timed(folder: Path, phase: str) -> Iterator[None]:
    """The time in `phase` added to seconds.json, also when an error or Ctrl-C ends it: a pair's phase times add up
    over its reruns, as a run's `info.elapsed` does over its resumes."""
    started = time.perf_counter()
    try:
        yield
    finally:
        spent = spent_so_far(folder)
        spent[phase] = spent.get(phase, 0.0) + time.perf_counter() - started
        atomic_write(folder / SECONDS, json.dumps(spent) + "\n")


def graded(folder: Path, run: CoopRun) -> dict[str, Any] | None:
    """The pair's eval.json when it grades the patches there now (written after each of them), else None."""
    grade = folder / "eval.json"
    patches = [folder / f"patch_agent{agent}.patch" for agent in run.agents()]
    try:
        if all(grade.stat().st_mtime_ns >= patch.stat().st_mtime_ns for patch in patches):
            return json.loads(grade.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    return None


class PairGraph(ServedGraph):
    """The pair graph as served: an error of ours ends the run, its exit status and line in the state (`exit_status`,
    `error`) as the agent graph's do, nothing after it run; an input with a field of no such name (`cop`: LangGraph
    would drop it unsaid) ends it so at its first node."""

    def __init__(self, *, refused: list[LlmIdeError] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.refused = refused if refused is not None else []

    def seen(self, input: Any) -> None:
        if isinstance(input, dict) and (error := unknown_field(input, PairInput)):
            self.refused.append(error)


def ending_the_run(node: Node, refused: list[LlmIdeError]) -> Node:
    def served_node(state: PairState, runtime: Runtime[PairContext]) -> dict[str, Any]:
        if state.get("exit_status"):
            return {}
        try:
            if refused:
                raise refused[0]
            return node(state, runtime)
        except LlmIdeError as error:
            return ended(error)

    served_node.__name__ = node.__name__
    return served_node


def graph(config: RunnableConfig) -> CompiledStateGraph:
    """LangGraph Studio (langgraph.json): the pair graph; input {run: {task, pair, setting, model, …}, output}."""
    refused: list[LlmIdeError] = []
    built = build_pair_graph(context_schema=None, wrap=lambda node: ending_the_run(node, refused))
    return PairGraph.of(built, refused=refused)


def run_pair(
    run: CoopRun,
    task: CoopTask,
    output: Path,
    settings: CoreSettings,
    coop: CoopSettings,
    on_event: Callable[[str, Any], None] | None = None,
    evaluate: bool = True,
) -> dict[str, Any]:
    """Plan, execute and (unless `evaluate` is off) grade one pair through the pair graph; returns eval.json's
    content (with the seconds of each phase)."""
    context = PairContext(settings=settings, coop=coop, on_event=on_event, evaluate=evaluate)
    state = build_pair_graph().invoke({"run": run.model_dump(mode="json"), "output": str(output)}, context=context)
    return state["result"]
