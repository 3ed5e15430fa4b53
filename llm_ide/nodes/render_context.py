from __future__ import annotations

import json
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.prompting import render
from llm_ide.resources import AgentContext
from llm_ide.state.context import Chunk, scored, select_chunks, trim_to_budget
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode, all_lessons, reasoning_chain


def code_context_text(ctx: AgentContext, chunks: list[Chunk], n_operations: int) -> str:
    params = ctx.score_params
    shown = select_chunks(scored(chunks, n_operations, params), params)
    view = ctx.workspace.view
    view.refresh(chunk.file_path for chunk in shown)
    shown = trim_to_budget(shown, [view.chunk_size(c) for c in shown], ctx.settings.memory.context_budget_chars)
    return view.render(shown, reread=False) if shown else render(ctx.templates, "code_context_empty")


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def history_text(ctx: AgentContext, nodes: list[OperationNode]) -> str:
    """The reasoning chain: newest nodes in full (the latest with its observation), older ones briefly, the oldest
    only counted."""
    if not nodes:
        return render(ctx.templates, "operation_history_empty")
    memory = ctx.settings.memory
    chain = reasoning_chain(nodes)
    recent, brief = memory.history_recent, memory.history_brief
    omitted = max(0, len(chain) - recent - brief)
    parts = [render(ctx.templates, "operations_omitted", count=omitted)] if omitted else []
    for position, node in enumerate(chain[omitted:], omitted):
        params = json.dumps(node.action_params, ensure_ascii=False)
        if position < len(chain) - recent:
            parts.append(render(ctx.templates, "operation_brief", node=node, params=clip(params, 160)))
            continue
        latest = node is nodes[-1]
        limit = memory.history_params_chars
        parts.append(
            render(
                ctx.templates,
                "operation",
                node=node,
                latest=latest,
                params=clip(params, limit),
                observation=node.observation,
            )
        )
    return "\n\n".join(parts)


def workspace_text(ctx: AgentContext, state: AgentState) -> str:
    nodes = state.get("operations", [])
    lessons = all_lessons(nodes)
    return render(
        ctx.templates,
        "workspace",
        task=render(ctx.templates, "task", task=state["task"]),
        code_context=code_context_text(ctx, state.get("code_context", []), state.get("n_operations", 0)),
        operation_history=history_text(ctx, nodes),
        tool_usage=ctx.tool_usage or render(ctx.templates, "tool_usage_empty"),
        lessons="\n".join(f"- {lesson}" for lesson in lessons) or render(ctx.templates, "lessons_empty"),
    )


def render_context(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    return {"workspace": workspace_text(runtime.context, state)}
