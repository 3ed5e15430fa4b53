from __future__ import annotations

import re
from dataclasses import replace
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
ROW = re.compile(r" *(\d+)\t")  # a numbered code row, as the code context and the view actions show them
SHARED_RUN = 3  # consecutive rows of the latest observation shown as they are in the code context: elided


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


def without_shown_rows(ctx: AgentContext, observation: str, code_context: str) -> str:
    """The observation with each run of numbered rows that the code context shows identically replaced by one line
    saying so: the latest operation usually opened the code that now heads the context."""
    shown = set(code_context.split("\n"))
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) >= SHARED_RUN:
            first, last = (ROW.match(row).group(1) for row in (run[0], run[-1]))  # type: ignore[union-attr]
            out.append(render(ctx.templates, "rows_in_context", first=first, last=last))
        else:
            out.extend(run)
        run.clear()

    for line in observation.split("\n"):
        if line in shown and ROW.match(line):
            run.append(line)
        else:
            flush()
            out.append(line)
    flush()
    return "\n".join(out)


def latest_text(ctx: AgentContext, node: OperationNode, code_context: str) -> str:
    shown = replace(node, observation=without_shown_rows(ctx, node.observation, code_context))
    return render(ctx.templates, "operation", node=shown, params=params_text(node))


def snapshot_text(ctx: AgentContext, state: AgentState) -> str:
    nodes = state.get("operations", [])
    chain = reasoning_chain(nodes)
    code_context = code_context_text(ctx, state.get("code_context", []), state.get("n_operations", 0))
    code_context = capped(ctx, {"code_context": code_context})["code_context"]  # what the latest row refers to
    learned = dict.fromkeys([*state.get("carried_lessons", []), *all_lessons(nodes)])
    lessons = "\n".join(f"- {lesson}" for lesson in learned) or render(ctx.templates, "lessons_empty")
    sections = {
        "operation_history": history_text(ctx, chain[:-1]),
        "lessons": lessons,
        "code_context": code_context,
        "latest": latest_text(ctx, nodes[-1], code_context) if nodes else "",
    }
    step = state.get("n_operations", 0)
    preface = ctx.variants.preface(ctx, state)  # e.g. a plan, ahead of the memory
    return render(ctx.templates, "snapshot", step=step, preface=preface, **capped(ctx, sections))


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
