"""The system part of a run's prompts, made once per run (conversation.py keeps it in the run's memo): the formats,
the action list (the core's and the variants' entries), the task and the tool usage; and the ceiling each prompt
section has (`capped`: the system part's, the memory snapshots')."""

from __future__ import annotations

from llm_ide.prompting import render, truncate
from llm_ide.variant import AgentContext, joined


def capped(ctx: AgentContext, sections: dict[str, str]) -> dict[str, str]:
    """Whatever the task, the code, the thoughts or the lessons hold, each prompt section has a ceiling
    (`memory.section_max_chars`; head and tail kept)."""
    caps = ctx.settings.memory.section_max_chars.model_dump()
    return {
        name: truncate(text, caps[name], ctx.templates) if name in caps else text for name, text in sections.items()
    }


def system_part(ctx: AgentContext, task: str, notes: str, more_actions: str) -> str:
    """`notes`: the variants' text after the task (e.g. what a script showed on the original code); `more_actions`:
    their notes on the action list."""
    ws, templates, exchange = ctx.codebase, ctx.templates, ctx.exchange
    lines = exchange.form.action_lines([action.line for action in ctx.variants.own.values()])
    values = {"view_max_lines": ws.view_max_lines, "search_max_results": ws.search_max_results}
    more = joined([*lines, more_actions])
    actions = render(templates, "actions", **values, command_timeout=ws.command_timeout, more_actions=more)
    sections = {
        "task": render(templates, "task", task=task) + (f"\n\n{notes}" if notes else ""),
        "tool_usage": ctx.tool_usage or render(templates, "tool_usage_empty"),
    }
    formats = {name: render(templates, name) for name in ("single_format", "reflect_format", "act_format")}
    return render(templates, "system", actions=actions, single=exchange.one_call, **formats, **capped(ctx, sections))
