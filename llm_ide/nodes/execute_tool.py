from __future__ import annotations

from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.actions import execute_action
from llm_ide.environments.base import EnvironmentFailure
from llm_ide.errors import ExitStatus
from llm_ide.prompting import truncate
from llm_ide.resources import AgentContext
from llm_ide.state.graph_state import AgentState


def execute_tool(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    ctx = runtime.context
    pending = state["pending"]
    try:
        outcome = execute_action(ctx.codebase, pending.action_type, pending.action_params)
    except EnvironmentFailure as error:
        failed = replace(pending, observation=f"Environment failure: {error}", returncode=-1)
        return {"pending": failed, "accessed": [], "exit_status": ExitStatus.ENVIRONMENT_ERROR}
    observation = truncate(outcome.observation, ctx.settings.agent.observation_max_chars, ctx.templates)
    done = replace(pending, observation=observation, returncode=outcome.returncode, duration=round(outcome.duration, 3))
    return {"pending": done, "accessed": outcome.accessed, "submitted": outcome.submitted}
