"""A reply the step could not read (a format error): kept as the step's `retry`, its node asks again with why and the
format the reply must have; `agent.max_format_errors` in a row end the run."""

from __future__ import annotations

from typing import Any

from llm_ide.calls import ModelReply
from llm_ide.errors import FormatError, FormatErrors, ended
from llm_ide.prompting import render
from llm_ide.state.graph_state import AgentState
from llm_ide.variant import AgentContext


def rejected_reply(reply: ModelReply, message: str, error: str, node: str) -> dict[str, Any]:
    """A reply that could not be used, as the step keeps it to ask again: its text and calls, why (the message the
    model is told, the error the console says) and the node that asks again."""
    calls = [call.record() for call in reply.tool_calls]
    return {"text": reply.text, "tool_calls": calls, "message": message, "error": error, "node": node}


def rejected(
    ctx: AgentContext, state: AgentState, reply: ModelReply, error: FormatError, expected: str, node: str
) -> dict[str, Any]:
    """The reply asked for again with the format it must have; `agent.max_format_errors` in a row end the run."""
    errors = state.get("format_errors", 0) + 1
    formats = {part: render(ctx.templates, part) for part in ("reflect_format", "act_format")}
    cut = reply.output_tokens if reply.finish_reason == "length" else None  # the room it had ran out first
    expected = render(ctx.templates, expected, **formats)
    message = render(ctx.templates, "format_error", error=str(error), expected=expected, cut=cut)
    update: dict[str, Any] = {"format_errors": errors, "retry": rejected_reply(reply, message, str(error), node)}
    limit = ctx.settings.agent.max_format_errors
    if errors >= limit:
        update |= ended(FormatErrors.after(errors, limit, str(error)))
    return update
