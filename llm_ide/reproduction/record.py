"""What the reproduction nodes share: the state they read, the variant's record in it, the worktree put back as the
run found it, every kept script run on the code as it is now."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

from llm_ide.reproduction.script import Script, reproduction_script, shown
from llm_ide.state.graph_state import Usage
from llm_ide.variant import AgentContext


class PhaseState(TypedDict, total=False):
    task: str
    usage: Usage
    n_operations: int
    elapsed: float
    worktree_patch: str
    exit_status: Any
    reproduction: dict[str, Any]  # scripts (kept), candidates (written), pending (not yet validated), done, after


def record_of(state: Any) -> dict[str, Any]:
    return {"scripts": [], "candidates": [], **(state.get("reproduction") or {})}


def original(ctx: AgentContext, state: Any) -> None:
    """The worktree put back as the run found it (a test, or a killed one, may have written into it)."""
    if ctx.restore_worktree is not None and "worktree_patch" in state:
        ctx.restore_worktree(state["worktree_patch"], keep=False)  # what a script wrote: not kept


def tell(ctx: AgentContext, item: Script, run: dict[str, Any], when: str) -> None:
    """What a script showed `when` it ran, told as it happens (the console's live lines; a batch's phase column)."""
    ctx.say(f"reproduction {item['name']} {when}: {run['verdict']} (exit {run['returncode']})")


def run_all(ctx: AgentContext, state: Any) -> list[Script]:
    """Every kept script run on the code as it is now, each as the prompts show it (with its `run`)."""
    env = ctx.codebase.env
    return [shown(env, item, reproduction_script(env, item, ctx.settings)) for item in record_of(state)["scripts"]]
