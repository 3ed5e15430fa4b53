from __future__ import annotations

from dataclasses import replace
from typing import Any

from llm_ide.prompting import render_string, truncate
from llm_ide.reproduction.record import run_all
from llm_ide.state.operations import OperationNode
from llm_ide.variant import ActionResult, AgentContext


def reproduce(ctx: AgentContext, state: dict[str, Any], node: OperationNode) -> ActionResult:
    """The `reproduce` action: every kept script run on the code as it is now; return code 0 when each shows the
    issue resolved."""
    templates = ctx.settings.reproduction.templates
    runs = run_all(ctx, state)
    resolved = bool(runs) and all(item["run"]["verdict"] == "resolved" for item in runs)
    text = render_string(templates.observation, scripts=runs) if runs else render_string(templates.none)
    observation = truncate(text, ctx.settings.agent.observation_max_chars, ctx.templates)
    duration = round(sum(item["run"]["seconds"] for item in runs), 3)
    return ActionResult(replace(node, observation=observation, returncode=0 if resolved else 1, duration=duration))
