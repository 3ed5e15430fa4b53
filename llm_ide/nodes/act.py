"""The step's model node: the reply (one call or two, as the run's `replies` ask for it; each call through the
variants' wrappers and the run's call policy), the verdict on the latest operation applied where it is read, and the
next operation placed: the child of a good operation, the sibling of a bad one (an alternative)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide.call_policy import counted
from llm_ide.conversation import replies_for
from llm_ide.errors import FormatErrors, ended
from llm_ide.prompting import render
from llm_ide.resources import AgentContext
from llm_ide.state.graph_state import AgentState, Usage, empty_usage
from llm_ide.state.operations import OperationNode, next_parent, with_reflection
from llm_ide.variant import ModelRequest, ModelResponse


def wall_deadline(ctx: AgentContext, state: AgentState) -> float | None:
    """When (time.monotonic()) the run's wall-time limit passes: a model call may not run past it."""
    limit = ctx.settings.agent.wall_time_limit
    return ctx.mark + limit - state.get("elapsed", 0.0) if limit else None


class Spending:
    """The core's model call: each request of a node by the run's call policy (on the agent's model unless it names
    its own), recorded at its place in the run and counted in the run's usage."""

    def __init__(self, ctx: AgentContext, state: AgentState) -> None:
        self.ctx, self.state = ctx, state
        self.usage: dict[str, Any] = {**empty_usage(), **(state.get("usage") or {})}

    def __call__(self, request: ModelRequest) -> ModelResponse:
        ctx = self.ctx
        model = request.model or ctx.model
        fields = {"index": self.usage["api_calls"], "step": self.state.get("n_operations", 0)}
        fields |= {"model": model.name} if model is not ctx.model else {}
        how: dict[str, Any] = {"kind": request.kind, "deadline": wall_deadline(ctx, self.state), "tools": request.tools}
        if request.n == 1:
            reply, _ = ctx.policy.call(model, request.messages, **how, **fields)
            replies, charged = [reply], [reply]
        else:
            replies, charged = ctx.policy.call_n(
                model, request.messages, request.n, batched=request.batched, **how, **fields
            )
        for reply in charged:
            self.usage = counted(self.usage, reply)
        return ModelResponse(tuple(reply.text for reply in replies), tuple(charged))


def format_failure(ctx: AgentContext, state: AgentState, response: str, error: Exception, expected: str) -> dict:
    """The reply asked for again with the format it must have; `agent.max_format_errors` in a row end the run."""
    errors = state.get("format_errors", 0) + 1
    formats = {part: render(ctx.templates, part) for part in ("reflect_format", "act_format")}
    message = render(
        ctx.templates, "format_error", error=str(error), expected=render(ctx.templates, expected, **formats)
    )
    retry = {"response": response, "message": message, "error": str(error)}  # the error: told on the console
    update: dict[str, Any] = {"format_errors": errors, "retry": retry}
    limit = ctx.settings.agent.max_format_errors
    if errors >= limit:
        update |= ended(FormatErrors(f"{errors} replies in a row could not be used (agent.max_format_errors: {limit})"))
    return update


def act(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    ctx = runtime.context
    spending = Spending(ctx, state)
    reply = replies_for(ctx.settings).reply(ctx, state, ctx.variants.model_call(ctx, spending))
    judged = with_reflection(state.get("operations", []), reply.verdict)
    update: dict[str, Any] = {"usage": Usage(**spending.usage)}  # type: ignore[typeddict-item]
    if reply.failure is not None:  # a verdict given before the unreadable part stands (two calls): in the tree now
        return (
            update | format_failure(ctx, state, *reply.failure) | ({"operations": judged[-1:]} if reply.verdict else {})
        )
    action = reply.action
    assert action is not None
    marks = {key: value for response in reply.responses for key, value in response.marks.items()}
    pending = OperationNode(
        id=len(judged),
        parent_id=next_parent(judged),
        thought=action.thought,
        action_type=action.action_type,
        action_params=action.action_params,
        marks=marks,
    )
    judged_last = judged[-1] if reply.verdict is not None else None  # committed with the step
    return update | {"pending": pending, "judged": judged_last, "format_errors": 0, "retry": None}
