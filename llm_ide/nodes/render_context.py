from __future__ import annotations

import json
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.prompting import render
from llm_ide.resources import AgentContext, resolve
from llm_ide.state.context import Chunk, rescore, select_chunks, trim_to_budget
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode, all_lessons, reasoning_chain


def code_context_text(ctx: AgentContext, chunks: list[Chunk], n_operations: int) -> str:
    params = ctx.score_params
    rescore(chunks, n_operations, params)
    shown = select_chunks(chunks, params)
    view = ctx.workspace.view
    view.refresh(chunk.file_path for chunk in shown)
    shown = trim_to_budget(shown, [view.chunk_size(c) for c in shown], ctx.config["memory"]["context_budget_chars"])
    return view.render(shown, reread=False) if shown else render(ctx.templates, "code_context_empty")


def history_text(ctx: AgentContext, nodes: list[OperationNode]) -> str:
    if not nodes:
        return render(ctx.templates, "operation_history_empty")
    latest = nodes[-1]
    return "\n\n".join(
        render(
            ctx.templates,
            "operation",
            node=node,
            latest=node is latest,
            params=json.dumps(node.action_params, ensure_ascii=False),
            observation=node.observation,
        )
        for node in reasoning_chain(nodes)
    )


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
    return {"workspace": workspace_text(resolve(runtime, state), state)}
