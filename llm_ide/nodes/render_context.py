from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide.conversation import capped, messages_for, params_text, prompt_chars
from llm_ide.prompting import render
from llm_ide.resources import AgentContext
from llm_ide.secrets import redact
from llm_ide.state.context import Chunk, scored, select_chunks, trim_to_budget
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode, all_lessons, reasoning_chain

RENEW_AT = 0.9  # of the prompt budget: a reflect prompt past it starts a new epoch


def code_context_text(ctx: AgentContext, chunks: list[Chunk], n_operations: int) -> str:
    params = ctx.score_params
    shown = select_chunks(scored(chunks, n_operations, params), params)
    view = ctx.codebase.view
    view.refresh(chunk.file_path for chunk in shown)
    shown = trim_to_budget(shown, [view.chunk_size(c) for c in shown], ctx.settings.memory.context_budget_chars)
    return view.render(shown, reread=False) if shown else render(ctx.templates, "code_context_empty")


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def history_text(ctx: AgentContext, chain: list[OperationNode]) -> str:
    """The reasoning chain before the latest operation, every node rendered the same way whenever it is shown (so the
    section only grows at its end); past `history_max` nodes the oldest are only counted, half of the maximum at a
    time."""
    if not chain:
        return render(ctx.templates, "operation_history_empty")
    memory = ctx.settings.memory
    limit = memory.history_max
    block = max(1, limit // 2)
    omitted = -(-(len(chain) - limit) // block) * block if len(chain) > limit else 0
    parts = [render(ctx.templates, "operations_omitted", count=omitted)] if omitted else []
    for node in chain[omitted:]:
        thought = clip(node.thought, memory.history_thought_chars)
        params = clip(params_text(node), memory.history_params_chars)
        parts.append(render(ctx.templates, "operation_brief", node=node, thought=thought, params=params))
    return "\n\n".join(parts)


def snapshot_text(ctx: AgentContext, state: AgentState) -> str:
    nodes = state.get("operations", [])
    chain = reasoning_chain(nodes)
    latest = render(ctx.templates, "operation", node=nodes[-1], params=params_text(nodes[-1])) if nodes else ""
    lessons = "\n".join(f"- {lesson}" for lesson in all_lessons(nodes)) or render(ctx.templates, "lessons_empty")
    sections = {
        "operation_history": history_text(ctx, chain[:-1]),
        "lessons": lessons,
        "code_context": code_context_text(ctx, state.get("code_context", []), state.get("n_operations", 0)),
        "latest": latest,
    }
    step = state.get("n_operations", 0)
    return render(ctx.templates, "snapshot", step=step, plan=state.get("plan", ""), **capped(ctx, sections))


def epoch_over(ctx: AgentContext, state: AgentState) -> bool:
    if "snapshot" not in state:
        return True
    memory = ctx.settings.memory
    if state.get("n_operations", 0) - state.get("snapshot_step", 0) >= memory.snapshot_every:
        return True
    return prompt_chars(messages_for(ctx, state, with_pending_reflection=False)) > RENEW_AT * memory.prompt_budget_chars


def render_context(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """At the start of an epoch, render the memory snapshot the prompts build on."""
    ctx = runtime.context
    if not epoch_over(ctx, state):
        return {}
    return {
        "snapshot": redact(snapshot_text(ctx, state)),  # files may hold secrets
        "snapshot_step": state.get("n_operations", 0),
    }
