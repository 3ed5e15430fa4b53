from __future__ import annotations

from typing import Any

from llm_ide.call_policy import counted
from llm_ide.conversation import Message
from llm_ide.errors import FormatErrors
from llm_ide.models import Model, ModelReply
from llm_ide.prompting import render
from llm_ide.resources import AgentContext
from llm_ide.state.graph_state import AgentState, Usage, empty_usage


def wall_deadline(ctx: AgentContext, state: AgentState) -> float | None:
    """When (time.monotonic()) the run's wall-time limit passes: a model call may not run past it."""
    limit = ctx.settings.agent.wall_time_limit
    return ctx.mark + limit - state.get("elapsed", 0.0) if limit else None


def call_model(
    ctx: AgentContext,
    state: AgentState,
    kind: str,
    messages: list[Message],
    model: Model | None = None,
    call_index: int | None = None,
) -> tuple[str, Usage]:
    """One model call (by default the agent's model, at the run's call count) by the run's call policy: the reply
    text and the run's usage after it."""
    usage = {**empty_usage(), **(state.get("usage") or {})}
    model = model or ctx.model
    index = agent_call_index(ctx, state, usage["api_calls"]) if call_index is None else call_index
    fields = record_fields(ctx, state, usage, model)
    reply, _ = ctx.policy.call(
        model, messages, kind=kind, call_index=index, deadline=wall_deadline(ctx, state), **fields
    )
    return reply.text, Usage(**counted(usage, reply))


def agent_call_index(ctx: AgentContext, state: AgentState, api_calls: int) -> int:
    """The agent model's own call count: the run's calls but those a variant made on a model of its own."""
    return api_calls - ctx.variants.foreign_calls(ctx, state) if ctx.variants else api_calls


def record_fields(ctx: AgentContext, state: AgentState, usage: dict[str, Any], model: Model) -> dict[str, Any]:
    """What leads a call's record in the trajectory: its place in the run, its step, a model not the agent's."""
    fields = {"index": usage["api_calls"], "step": state.get("n_operations", 0)}
    return fields | ({"model": model.name} if model is not ctx.model else {})


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
    """A reply got outside `call_model` (several at once) settled by the call policy; its usage added to `usage`."""
    fields = record_fields(ctx, state, usage, model)
    reply, _ = ctx.policy.settle(model, messages, reply, started, reservation, kind=kind, **fields)
    usage.update(counted(usage, reply))
    return reply.text


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
        update["exit_status"] = FormatErrors.exit_status
    return update
