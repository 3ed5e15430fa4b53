"""The step's action: the pending operation run through the variants' wrappers (a gate may settle it without running
it), once even across kills (`run_once`); the code it showed or changed is what it accessed."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.actions import ACTIONS, execute_action, read_only
from llm_ide.codebase import ActionOutcome, ParamError
from llm_ide.codeview.changes import edited_scopes
from llm_ide.environments.base import EnvironmentFailure
from llm_ide.errors import ended
from llm_ide.kills import CHANGES_WORKSPACE, failpoint
from llm_ide.nodes.model_call import wall_deadline
from llm_ide.prompting import truncate
from llm_ide.recovery import resume
from llm_ide.secrets import redact
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode
from llm_ide.text import clean_text
from llm_ide.variant import ActionResult, AgentContext


def may_change(node: OperationNode) -> bool:
    if node.action_type != "bash":
        return node.action_type in CHANGES_WORKSPACE
    return not read_only(str(node.action_params.get("command") or ""))


def run_once(ctx: AgentContext, node: OperationNode, before: str | None, deadline: float | None) -> ActionOutcome:
    """The operation, its effect on the worktree exactly once: one a killed process had started runs again on the
    worktree put back as the snapshot `before` it had (a command's effects outside the worktree may then happen
    twice: its observation says so); without a snapshot it is not run again and the agent is told. A command is cut
    at the wall-time `deadline`."""
    ws = replace(ctx.codebase, deadline=deadline)
    if ctx.intents is None or node.action_type not in CHANGES_WORKSPACE:
        return execute_action(ws, node.action_type, node.action_params)
    if ctx.intents.started_before(node.id) and (resumed := resume(ws, node, before, ctx.restore_worktree)) is not None:
        return resumed
    ctx.intents.begin(node.id, node.action_type)
    failpoint("execute.begun")  # recorded as started, not run yet
    return execute_action(ws, node.action_type, node.action_params)


def perform(ctx: AgentContext, state: AgentState, node: OperationNode) -> ActionResult:
    """The action itself: a variant's (or what it answers in a run without it), or the core's on the worktree,
    whose snapshot after a change belongs to this step (saved with it, or redone with it)."""
    ws = ctx.codebase
    action = ctx.variants.actions.get(node.action_type)
    if action is not None and node.action_type not in ACTIONS:
        try:
            if node.action_type in ctx.variants.absent:
                return ActionResult(node).settled(action.absent(ctx, node.action_params))
            return action.run(ctx, state, node)
        except ParamError as error:
            bad = ws.observe("bad_params", action_type=node.action_type, error=str(error))
            return ActionResult(node).settled(ActionOutcome(bad, 2))
    outcome = run_once(ctx, node, state.get("worktree_patch"), wall_deadline(ctx, state))
    failpoint("execute.done")  # the change is made, the worktree snapshot not yet taken
    snapshot = ctx.snapshot_patch() if ctx.snapshot_patch and may_change(node) else None
    result = ActionResult(node, submitted=outcome.submitted).settled(outcome)
    if snapshot is None:  # a read-only command changed nothing: the last snapshot stands
        return result
    if (before := state.get("worktree_patch")) is not None and snapshot != before:
        result = replace(result, accessed=[*result.accessed, *edited_scopes(ws.view, before, snapshot)])
    return result.merged({"worktree_patch": snapshot})  # whatever made the change, its lines are accessed


def execute_tool(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """The pending operation, through the variants' wrappers (a gate may settle it without running it)."""
    ctx = runtime.context
    pending = state["pending"]
    assert pending is not None  # `act` made it
    run = ctx.variants.action_run(ctx, state, partial(perform, ctx, state))
    try:
        result = run(pending)
    except EnvironmentFailure as error:
        failed = replace(pending, observation=f"Environment failure: {error}", returncode=-1)
        return {"pending": failed, "accessed": [], **ended(error)}
    shown = truncate(
        clean_text(redact(result.node.observation)), ctx.settings.agent.observation_max_chars, ctx.templates
    )
    done = replace(result.node, observation=shown)
    return {"pending": done, "accessed": result.accessed, "submitted": result.submitted, **result.update}
