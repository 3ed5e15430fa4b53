"""An operation's effect on the worktree exactly once, across kills: an operation a killed process had started is
run again on the worktree as it was before it, or, where that cannot be, told rather than run twice
(llm_ide/workspace/intents.py records what was started)."""

from __future__ import annotations

from dataclasses import replace

from llm_ide.actions import execute_action
from llm_ide.codebase import ActionOutcome, Codebase
from llm_ide.faults import failpoint
from llm_ide.state.operations import OperationNode
from llm_ide.variant import AgentContext
from llm_ide.workspace.intents import CHANGES_WORKSPACE, edit_applied


def started_before(ws: Codebase, node: OperationNode) -> ActionOutcome | None:
    """The outcome of an operation a killed process had started: told, never run twice. None: it had not begun to
    change anything (an edit whose `old` text is still there, a file not yet created), so it runs now."""
    params = node.action_params
    path = params.get("path") if isinstance(params.get("path"), str) else None
    if node.action_type in {"edit", "create"} and path:
        try:
            path = ws.path(params)
        except ValueError:
            return None
        text = ws.read_text(path)
        if node.action_type == "create":
            if text is None:
                return None
            if text == params.get("content"):
                return ActionOutcome(ws.observe("already_applied", path=path, action_type="create"), 0)
        elif text is not None and isinstance(params.get("old"), str) and isinstance(params.get("new"), str):
            applied = edit_applied(text, params["old"], params["new"])
            if applied is False:
                return None
            if applied:
                return ActionOutcome(ws.observe("already_applied", path=path, action_type="edit"), 0)
    return ActionOutcome(ws.observe("interrupted", action_type=node.action_type), -1)


def run_once(ctx: AgentContext, node: OperationNode, before: str | None, deadline: float | None) -> ActionOutcome:
    """The operation, its effect on the worktree exactly once: one a killed process had started runs again on the
    worktree put back as the snapshot `before` it had (a command's effects outside the worktree may then happen
    twice: its observation says so); without a snapshot it is not run again and the agent is told. A command is cut
    at the wall-time `deadline`."""
    ws = replace(ctx.codebase, deadline=deadline)
    if ctx.intents is None or node.action_type not in CHANGES_WORKSPACE:
        return execute_action(ws, node.action_type, node.action_params)
    if ctx.intents.started_before(node.id):
        if before is not None and ctx.restore_worktree is not None and ctx.restore_worktree(before):
            outcome = execute_action(ws, node.action_type, node.action_params)
            if node.action_type != "bash":
                return outcome
            return replace(outcome, observation=f"{outcome.observation}\n{ws.observe('rerun')}".lstrip("\n"))
        if (told := started_before(ws, node)) is not None:
            return told
    ctx.intents.begin(node.id, node.action_type)
    failpoint("execute.begun")  # recorded as started, not run yet
    return execute_action(ws, node.action_type, node.action_params)
