"""A model call of the step (`reflect`'s, `act`'s, a variant's node's): made through the variants' model-call
wrappers and the run's call policy on the agent's model (or the one the request names), counted in the run's usage,
cut at the wall-time limit; its reply read by the run's exchange (one it cannot read: nodes/rejected.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llm_ide.call_policy import counted
from llm_ide.calls import ModelReply
from llm_ide.conversation import messages_for
from llm_ide.errors import FormatError
from llm_ide.exchange import Offer, Reading
from llm_ide.many_calls import call_n
from llm_ide.state.graph_state import AgentState, Proposal, Usage, empty_usage
from llm_ide.variant import AgentContext, ModelRequest, ModelResponse


def wall_deadline(ctx: AgentContext, state: AgentState) -> float | None:
    """When (time.monotonic()) the run's wall-time limit passes: a model call or a command may not run past it."""
    limit = ctx.settings.agent.wall_time_limit
    return ctx.clock.mark + limit - state.get("elapsed", 0.0) if limit else None


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
            replies, charged = call_n(
                ctx.policy, model, request.messages, request.n, batched=request.batched, **how, **fields
            )
        for reply in charged:
            self.usage = counted(self.usage, reply)
        return ModelResponse(tuple(replies), tuple(charged))

    def spent(self) -> dict[str, Any]:
        return {"usage": Usage(**self.usage)}  # type: ignore[typeddict-item]


def tools_of(ctx: AgentContext) -> list[dict[str, Any]] | None:
    """The tools every request of the run carries (the same list, made once), or None."""
    ws = ctx.codebase
    values: dict[str, Any] = {"view_max_lines": ws.view_max_lines, "search_max_results": ws.search_max_results}
    values |= {"command_timeout": ws.command_timeout}
    schemas = {**ctx.settings.templates.tools, **{name: a.schema for name, a in ctx.variants.own.items()}}
    return ctx.memo.get(("tools",), lambda: ctx.exchange.form.tools(schemas, values))


@dataclass(frozen=True)
class Asked:
    """A call of the step: what its reply gave (or why it cannot be used), the reply, what the variants' wrappers
    marked on the operation it makes, and the run's usage with it."""

    reading: Reading | FormatError
    reply: ModelReply
    marks: dict[str, Any]
    usage: dict[str, Any]

    def proposal(self) -> Proposal:
        assert isinstance(self.reading, Reading) and self.reading.action is not None
        action = self.reading.action
        return Proposal(
            thought=action.thought, action_type=action.action_type, action_params=action.action_params, marks=self.marks
        )


def ask(ctx: AgentContext, state: AgentState, kind: str, read: Callable[[ModelReply, Offer], Reading]) -> Asked:
    """One call of the step, through the variants' wrappers, its reply read by `read`."""
    spending = Spending(ctx, state)
    messages, tools = messages_for(ctx, state), tools_of(ctx)
    offer = Offer(ctx.grammar, tools, messages[0]["content"])
    parse: Callable[[ModelReply], Reading] = lambda reply: read(reply, offer)  # noqa: E731
    response = ctx.variants.model_call(ctx, spending)(ModelRequest(kind, messages, parse=parse, tools=tools))
    try:
        reading: Reading | FormatError = parse(response.reply)
    except FormatError as error:
        reading = error
    return Asked(reading, response.reply, dict(response.marks), spending.spent())
