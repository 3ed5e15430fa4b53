from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide.conversation import messages_for
from llm_ide.faults import failpoint
from llm_ide.nodes.act import act
from llm_ide.nodes.model_call import format_failure
from llm_ide.resources import AgentContext
from llm_ide.sampling.candidates import fold, sample_replies
from llm_ide.sampling.choose import Chooser
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode, next_parent, with_reflection


def sampled_act(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """`act` with action sampling: `sampling.k` candidate replies to the act conversation, identical actions folded,
    one chosen (`sampling.choice`); only the chosen one runs, every candidate is recorded on the operation node."""
    ctx = runtime.context
    sampling = ctx.settings.sampling
    if sampling.k == 1:
        return act(state, runtime)
    nodes = state.get("operations", [])
    single = ctx.settings.agent.single_call and bool(nodes)
    messages = messages_for(ctx, state, with_pending_reflection=not single)
    texts, usage = sample_replies(ctx, state, messages, sampling.k)
    candidates, failures = fold(texts, single, ctx.grammar)
    if not candidates:  # no usable reply: asked again like a single malformed one
        text, error = failures[0]
        return {"usage": usage, **format_failure(ctx, state, text, error, "single_format" if single else "act_format")}
    chooser = Chooser(ctx, {**state, "usage": usage}, messages, ctx.resources.get("sampling"))
    chosen, choice = chooser.choose(candidates)
    failpoint("sampling.chosen")  # every call of the step made, its update not yet saved
    pick = candidates[chosen]
    update: dict[str, Any] = {"usage": chooser.usage, "format_errors": 0, "retry": None}
    if single:
        update["reflection"] = pick.reflection
        update["parent_id"] = next_parent(with_reflection(nodes, pick.reflection))
    update["pending"] = OperationNode(
        id=len(nodes),
        parent_id=update.get("parent_id", state.get("parent_id")),
        thought=pick.action.thought,
        action_type=pick.action.action_type,
        action_params=pick.action.action_params,
        marks={
            "candidates": [candidate.record(position == chosen) for position, candidate in enumerate(candidates)],
            "choice": {**choice, "samples": len(texts), "unusable": len(failures)},
        },
    )
    return update
