from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.codeview.changes import tracked_diff
from llm_ide.codeview.observed import paths_named
from llm_ide.conversation import capped, messages_for, params_text, prompt_chars
from llm_ide.parsing import first_sentence
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


def history_text(ctx: AgentContext, chain: list[OperationNode], count: int) -> str:
    """The first `count` nodes of the reasoning chain (those before the recent operations), every node rendered the
    same way whenever it is shown (so the section only grows at its end); past `history_max` nodes the oldest are only
    counted, half of the maximum at a time. A summary that is the first sentence of the next node's thought (a
    single-call verdict's) is not repeated."""
    if not count:
        return render(ctx.templates, "operation_history_empty")
    memory = ctx.settings.memory
    limit = memory.history_max
    block = max(1, limit // 2)
    omitted = -(-(count - limit) // block) * block if count > limit else 0
    parts = [render(ctx.templates, "operations_omitted", count=omitted)] if omitted else []
    for node, following in zip(chain[omitted:count], chain[omitted + 1 :], strict=False):
        thought = clip(node.thought, memory.history_thought_chars)
        params = clip(params_text(node), memory.history_params_chars)
        summary = "" if node.summary == first_sentence(following.thought) else node.summary or "(none)"
        parts.append(
            render(ctx.templates, "operation_brief", node=node, thought=thought, params=params, summary=summary)
        )
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


def recent_text(ctx: AgentContext, recent: list[OperationNode], code_context: str) -> str:
    """The last operations of the chain as they ran: thought, action, observation (its rows the code context shows
    left out); the last one is the latest."""
    parts = []
    for node in recent:
        shown = replace(node, observation=without_shown_rows(ctx, node.observation, code_context))
        parts.append(
            render(ctx.templates, "operation", node=shown, params=params_text(node), latest=node is recent[-1])
        )
    return "\n".join(parts)


def files_text(ctx: AgentContext, nodes: list[OperationNode]) -> str:
    """The repository's files that the operations' actions and outputs named, in first-seen order."""
    named = paths_named(
        [text for node in nodes for text in (params_text(node), node.observation)], ctx.codebase.env.workdir
    )
    return ", ".join(ctx.codebase.view.existing(named))


def snapshot_text(ctx: AgentContext, state: AgentState) -> str:
    nodes = state.get("operations", [])
    chain = reasoning_chain(nodes)
    code_context = code_context_text(ctx, state.get("code_context", []), state.get("n_operations", 0))
    code_context = capped(ctx, {"code_context": code_context})["code_context"]  # what the latest row refers to
    learned = dict.fromkeys([*state.get("carried_lessons", []), *all_lessons(nodes)])
    lessons = "\n".join(f"- {lesson}" for lesson in learned) or render(ctx.templates, "lessons_empty")
    recent = chain[-ctx.settings.memory.recent_operations :]
    sections = {
        "operation_history": history_text(ctx, chain, len(chain) - len(recent)),
        "lessons": lessons,
        "files": files_text(ctx, nodes),
        "changes": tracked_diff(state.get("worktree_patch", "")),
        "code_context": code_context,
        "latest": recent_text(ctx, recent, code_context) if nodes else "",
    }
    step = state.get("n_operations", 0)
    preface = ctx.variants.prompt(ctx, state).preface  # e.g. a plan, ahead of the memory
    return render(ctx.templates, "snapshot", step=step, preface=preface, **capped(ctx, sections))


def renewal(ctx: AgentContext, state: AgentState) -> str | None:
    """The snapshot a new epoch starts with, or None while the current one goes on. Renewed at the first step, when
    asked (`snapshot` emptied), every `snapshot_every` operations if set, when the next prompt nears the prompt budget,
    and past `renew_at_chars` when the memory it sends (snapshot and turns since) is `renew_ratio` times a fresh
    snapshot: a renewal is paid uncached once, what it saves is re-read (cached) at every later call."""
    memory = ctx.settings.memory
    since = state.get("n_operations", 0) - state.get("snapshot_step", 0)
    if not state.get("snapshot") or (memory.snapshot_every and since >= memory.snapshot_every):
        return snapshot_text(ctx, state)
    messages = messages_for(ctx, state)
    size = prompt_chars(messages)
    ceiling = RENEW_AT * memory.prompt_budget_chars
    if size <= min(memory.renew_at_chars, ceiling):
        return None
    fresh = snapshot_text(ctx, state)
    sent = size - len(messages[0]["content"])  # the memory part: the snapshot and the turns since
    return fresh if size > ceiling or sent >= memory.renew_ratio * len(fresh) else None


def render_context(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """At the start of an epoch, render the memory snapshot the prompts build on."""
    snapshot = renewal(runtime.context, state)
    if snapshot is None:
        return {}
    return {"snapshot": redact(snapshot), "snapshot_step": state.get("n_operations", 0)}  # files may hold secrets
