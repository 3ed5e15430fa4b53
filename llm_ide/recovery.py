"""Resuming an operation a killed process had started (llm_ide/kills.py records what was started): run again on the
worktree put back as it was before it, or, when it cannot be, told rather than run twice, or run when it had not begun
to change anything (llm_ide/nodes/execute_tool.py runs an operation once across kills)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from llm_ide.actions import execute_action
from llm_ide.codebase import ActionOutcome, Codebase
from llm_ide.file_actions import file_text, named_path
from llm_ide.state.operations import OperationNode


def resume(
    ws: Codebase, node: OperationNode, before: str | None, restore: Callable[[str], bool] | None
) -> ActionOutcome | None:
    """An operation a killed process had started: run again on the worktree put back (`restore`) as the snapshot
    `before` it had (a command's observation says it ran again), else what `started_before` tells. None: it had not
    begun to change anything, so it runs now."""
    if before is not None and restore is not None and restore(before):
        outcome = execute_action(ws, node.action_type, node.action_params)
        if node.action_type != "bash":
            return outcome
        return replace(outcome, observation=f"{outcome.observation}\n{ws.observe('rerun')}".lstrip("\n"))
    return started_before(ws, node)


def started_before(ws: Codebase, node: OperationNode) -> ActionOutcome | None:
    """The outcome of an operation a killed process had started: told, never run twice. None: it had not begun to
    change anything (an edit whose `old` text is still there, a file not yet created), so it runs now."""
    params = node.action_params
    path = params.get("path") if isinstance(params.get("path"), str) else None
    if node.action_type in {"edit", "create"} and path:
        try:
            path = named_path(ws, params)
        except ValueError:
            return None
        text = file_text(ws, path)
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


def edit_applied(text: str, old: str, new: str) -> bool | None:
    """Whether an edit (`old` → `new`) is in `text`: True applied, False not yet, None cannot tell."""
    if new and old in new:
        if new in text:
            return True
        return False if text.count(old) == 1 else None
    if text.count(old) == 1:
        return False
    return True if new and new in text and old not in text else None
