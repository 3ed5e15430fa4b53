"""The reproduction phase, before the agent's first step: a subgraph whose steps are checkpointed like the agent's,
so a killed run resumes it without writing or validating a test twice.

    START → write_reproduction ⇄ validate_reproduction → reproduce_before → END   (`reproduction.generate`)
    START → reproduce_before → END                                              (a given script only)
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from llm_ide.graph import guarded
from llm_ide.reproduction.nodes.before import reproduce_before
from llm_ide.reproduction.nodes.validate import validate_reproduction
from llm_ide.reproduction.nodes.write import write_reproduction
from llm_ide.reproduction.record import PhaseState, record_of
from llm_ide.variant import AgentContext


def after_start(state: PhaseState, runtime: Runtime[AgentContext]) -> str:
    return "write_reproduction" if runtime.context.settings.reproduction.generate else "reproduce_before"


def after_validate(state: PhaseState, runtime: Runtime[AgentContext]) -> str:
    """Another test while fewer than `keep` passed and `tries` are left."""
    own = runtime.context.settings.reproduction
    record = record_of(state)
    kept = sum(1 for item in record["scripts"] if item["source"] == "generated")
    return "write_reproduction" if kept < own.keep and len(record["candidates"]) < own.tries else "reproduce_before"


def after_write(state: PhaseState, runtime: Runtime[AgentContext]) -> str:
    if state.get("exit_status"):
        return END
    return "validate_reproduction" if record_of(state).get("pending") else after_validate(state, runtime)


def build_phase() -> CompiledStateGraph:
    builder = StateGraph(PhaseState, context_schema=AgentContext)
    builder.add_node("write_reproduction", guarded(write_reproduction))
    builder.add_node("validate_reproduction", guarded(validate_reproduction))
    builder.add_node("reproduce_before", guarded(reproduce_before))
    builder.add_conditional_edges(START, after_start, ["write_reproduction", "reproduce_before"])
    after = ["validate_reproduction", "write_reproduction", "reproduce_before", END]
    builder.add_conditional_edges("write_reproduction", after_write, after)
    builder.add_conditional_edges("validate_reproduction", after_validate, ["write_reproduction", "reproduce_before"])
    builder.add_edge("reproduce_before", END)
    return builder.compile(name="reproduction")


PHASE = build_phase()  # a module's compiled graph: LangGraph draws it inside the node that runs it


def reproduction(state: dict[str, Any], runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """The phase, once (a run that did it, or resumes past it, goes on); its subgraph gets the run's context."""
    if (state.get("reproduction") or {}).get("done") or state.get("operations"):
        return {}
    out = PHASE.invoke(state, context=runtime.context)
    kept = ("reproduction", "usage", "exit_status", "error")  # a phase its first step ended has no record
    return {key: out[key] for key in kept if out.get(key)}
