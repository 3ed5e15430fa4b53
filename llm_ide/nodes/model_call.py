from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from llm_ide.budget import admitted
from llm_ide.conversation import Message
from llm_ide.errors import ExitStatus
from llm_ide.models import Model, ModelReply
from llm_ide.prompting import render, truncate
from llm_ide.resources import AgentContext
from llm_ide.secrets import known_secrets, redact
from llm_ide.state.graph_state import AgentState, Usage, empty_usage


def wall_deadline(ctx: AgentContext, state: AgentState) -> float | None:
    """When (time.monotonic()) the run's wall-time limit passes: a model call may not run past it."""
    limit = ctx.settings.agent.wall_time_limit
    return ctx.mark + limit - state.get("elapsed", 0.0) if limit else None


def redacted_messages(ctx: AgentContext, messages: list[Message]) -> list[Message]:
    """The messages with every known secret masked; a message already seen (most of a conversation is the previous
    call's) is not scanned again."""
    secrets = tuple(known_secrets())
    seen = ctx.redacted
    if len(seen) > 4 * len(messages) + 16:
        seen.clear()
    out = []
    for message in messages:
        key = (message["content"], secrets)
        if key not in seen:
            seen[key] = redact(message["content"], list(secrets))
        out.append({**message, "content": seen[key]})
    return out


def call_model(
    ctx: AgentContext,
    state: AgentState,
    kind: str,
    messages: list[Message],
    model: Model | None = None,
    call_index: int | None = None,
) -> tuple[str, Usage]:
    """One model call (by default the agent's model, at the run's call count): the reply text and the run's usage
    after it; the call is recorded for the trajectory."""
    messages = redacted_messages(ctx, messages)  # files may hold secrets
    usage = {**empty_usage(), **(state.get("usage") or {})}
    model = model or ctx.model
    index = agent_call_index(ctx, state, usage["api_calls"]) if call_index is None else call_index
    started = time.perf_counter()
    with admitted(ctx.cost_budget) as reservation:  # a shared budget with no room left ends the run (cost_limit)
        reply = model.complete(messages, call_index=index, deadline=wall_deadline(ctx, state))
    text = account(ctx, state, kind, messages, reply, started, usage, model, reservation)
    return text, Usage(**usage)


def agent_call_index(ctx: AgentContext, state: AgentState, api_calls: int) -> int:
    """The agent model's own call count: the run's calls but those a variant made on a model of its own."""
    return api_calls - ctx.variants.foreign_calls(ctx, state) if ctx.variants else api_calls


def account(
    ctx: AgentContext,
    state: AgentState,
    kind: str,
    messages: list[Message],
    reply: ModelReply,
    started: float,
    usage: dict[str, Any],
    model: Model,
    reservation: Any = 0.0,
) -> str:
    """The reply's text (redacted, capped); the call recorded, its cost charged (settling the budget's reservation
    for it) and its usage added to `usage`."""
    reply = replace(reply, text=redact(reply.text))  # a key the endpoint echoes is never stored
    text = reply.text
    if (cap := ctx.settings.agent.max_reply_chars) and len(text) > cap:  # head and tail: the closing tags survive
        text = truncate(text, cap, ctx.templates)
    if ctx.record_call is not None:
        ctx.record_call(
            {
                "index": usage["api_calls"],
                "kind": kind,
                "step": state.get("n_operations", 0),
                "prompt": "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages),
                "prompt_chars": sum(len(m["content"]) for m in messages),
                "prompt_tokens": reply.input_tokens,
                "response": text,
                "response_tokens": reply.output_tokens,
                "cache_read_tokens": reply.cache_read_tokens,
                "cache_write_tokens": reply.cache_write_tokens,
                "cost": reply.cost,
                "seconds": round(time.perf_counter() - started, 3),
                **({"model": model.name} if model is not ctx.model else {}),
                **({"reported_usage": reply.reported_usage} if reply.reported_usage else {}),
            }
        )
    if ctx.cost_budget is not None:
        ctx.cost_budget.add(reply.cost, reservation)
    usage.update(
        api_calls=usage["api_calls"] + 1,
        input_tokens=usage["input_tokens"] + reply.input_tokens,
        output_tokens=usage["output_tokens"] + reply.output_tokens,
        cache_read_tokens=usage["cache_read_tokens"] + reply.cache_read_tokens,
        cache_write_tokens=usage["cache_write_tokens"] + reply.cache_write_tokens,
        cost=usage["cost"] + reply.cost,
    )
    return text


def expected_format(ctx: AgentContext, name: str) -> str:
    formats = {part: render(ctx.templates, part) for part in ("reflect_format", "act_format")}
    return render(ctx.templates, name, **formats)


def format_failure(
    ctx: AgentContext, state: AgentState, response: str, error: Exception, expected: str
) -> dict[str, Any]:
    errors = state.get("format_errors", 0) + 1
    update: dict[str, Any] = {
        "format_errors": errors,
        "retry": {
            "response": response,
            "message": render(ctx.templates, "format_error", error=str(error), expected=expected_format(ctx, expected)),
        },
    }
    if errors >= ctx.settings.agent.max_format_errors:
        update["exit_status"] = ExitStatus.FORMAT_ERROR
    return update
