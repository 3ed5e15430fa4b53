"""The one way a model is called, whoever calls it (the agent's nodes, a variant's, a reviewer, a planner): the
messages with every known secret masked, room in the shared budget taken before the call (none left: the run ends
with `cost_limit`), the reply masked and capped, the call recorded and charged, its usage counted. Retries, timeouts
and deadlines are the model's own (llm_ide/models.py). A reply's tool calls are data throughout: masked, recorded
(`tool_calls` beside the `response` text) and charged with it."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from llm_ide.budget import Budget, admitted
from llm_ide.calls import message_text
from llm_ide.kills import interrupts_held
from llm_ide.models import Message, Model, ModelReply
from llm_ide.prompting import truncate
from llm_ide.secrets import known_secrets, redact
from llm_ide.settings import Templates

Tools = list[dict[str, Any]] | None  # the actions as tools, or none (llm_ide/action_tools.py)

Recorder = Callable[[dict[str, Any]], None]


@dataclass
class CallPolicy:
    """`record`: told of each call's record (the trajectory's calls log); `budget`: charged with every call;
    `reply_cap`: a longer reply keeps its head and tail (`templates.truncated` says what was cut)."""

    record: Recorder | None = None
    budget: Budget | None = None
    reply_cap: int | None = None
    templates: Templates | None = None
    masked: dict[tuple[str, tuple[str, ...]], str] = field(default_factory=dict)  # messages already masked

    def room(self, calls: int = 1) -> AbstractContextManager[Any]:
        """The shared budget's room for `calls` calls made inside the block (none to take without a budget)."""
        return nullcontext(0.0) if self.budget is None else admitted(self.budget, calls)

    def recording(self, record: Recorder | None) -> CallPolicy:
        """The same policy (budget, cap, masking) with calls recorded elsewhere (a variant's own list)."""
        return replace(self, record=record, masked={})

    def mask(self, messages: Sequence[Message]) -> list[Message]:
        """The messages with every known secret masked (in their tool calls' arguments too); a message's content
        already seen (most of a conversation is the previous call's) is not scanned again."""
        secrets = tuple(known_secrets())
        seen = self.masked
        if len(seen) > 4 * len(messages) + 16:
            seen.clear()
        out: list[Message] = []
        for message in messages:
            key = (message["content"], secrets)
            if key not in seen:
                seen[key] = redact(message["content"], list(secrets))
            out.append({**message, "content": seen[key]})
            if calls := message.get("tool_calls"):
                out[-1]["tool_calls"] = [{**call, "args": masked_value(call["args"], list(secrets))} for call in calls]
        return out

    def call(
        self,
        model: Model,
        messages: Sequence[Message],
        /,
        *,
        kind: str,
        deadline: float | None = None,
        tools: Tools = None,
        **fields: Any,
    ) -> tuple[ModelReply, dict[str, Any]]:
        """One call: the reply (masked, capped) and its record; `fields` lead the record (its index, step…)."""
        masked, started = self.mask(messages), time.perf_counter()
        made: list[ModelReply] = []  # the reply, from the client's return until it is recorded and charged
        try:
            with self.room() as reservation:  # a shared budget with no room left ends the run (cost_limit)
                made.append(self.complete(model, masked, deadline, tools))
            with interrupts_held():  # its record and its charge whole: an interrupt in them comes after them
                return self.settle(model, masked, made.pop(), started, reservation, kind=kind, **fields)
        except BaseException as error:  # replies that streamed in part, or came whole as an interrupt came: paid
            with interrupts_held():  # for, recorded, charged (a later call of its index asked again: discarded_calls)
                for paid in getattr(error, "paid", None) or made:
                    self.settle(model, masked, paid, started, kind=kind, **fields)
            raise

    def complete(self, model: Model, masked: list[Message], deadline: float | None, tools: Tools) -> ModelReply:
        return model.complete(masked, deadline=deadline, tools=tools)

    def cleaned(self, reply: ModelReply) -> ModelReply:
        """A reply masked (its text and its calls' arguments: a key the endpoint echoes is never stored) and capped."""
        calls = tuple(replace(call, arguments=redact(call.arguments)) for call in reply.tool_calls)
        return replace(reply, text=self.capped(redact(reply.text)), tool_calls=calls)

    def settle(
        self,
        model: Model,
        masked: Sequence[Message],
        reply: ModelReply,
        started: float,
        reservation: Any = 0.0,
        /,
        *,
        kind: str,
        **fields: Any,
    ) -> tuple[ModelReply, dict[str, Any]]:
        """A reply made (its `cut` requests first): masked, capped, recorded, charged (settling its `reservation`)."""
        for paid in reply.cut:
            self.settle(model, masked, paid, started, kind=kind, **fields)
        reply = self.cleaned(replace(reply, cut=()))
        shown = [message_text(m) for m in masked]
        record = {
            **fields,
            "kind": kind,
            "prompt": "\n\n".join(f"[{m['role']}]\n{text}" for m, text in zip(masked, shown, strict=True)),
            "prompt_chars": sum(map(len, shown)),
            "prompt_tokens": reply.input_tokens,
            "response": reply.text,
            **({"tool_calls": [call.record() for call in reply.tool_calls]} if reply.tool_calls else {}),
            "response_tokens": reply.output_tokens,
            "cache_read_tokens": reply.cache_read_tokens,
            "cache_write_tokens": reply.cache_write_tokens,
            "cost": reply.cost,
            "seconds": round(time.perf_counter() - started, 3),
            **({"reported_usage": reply.reported_usage} if reply.reported_usage else {}),
            **({"usage_estimated": True} if reply.estimated else {}),  # the tokens and cost are estimates
            **({"finish_reason": end} if (end := reply.finish_reason) not in (None, "stop", "tool_calls") else {}),
        }
        if self.record is not None:
            self.record(record)
        if self.budget is not None:
            self.budget.add(reply.cost, reservation)
        return reply, record

    def capped(self, text: str) -> str:
        if self.reply_cap and len(text) > self.reply_cap and self.templates is not None:
            return truncate(text, self.reply_cap, self.templates)  # head and tail: the closing tags survive
        return text


def masked_value(value: Any, secrets: list[str]) -> Any:
    """A tool call's arguments with every secret masked in their strings."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {key: masked_value(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [masked_value(item, secrets) for item in value]
    return value


def counted(usage: dict[str, Any], reply: ModelReply) -> dict[str, Any]:
    """`usage` (api_calls, tokens, cost) with one more call; `estimated_calls` counts those whose usage was estimated
    (the response carried none, or an impossible one): the tokens and cost are then partly estimates."""
    return {
        **usage,
        "api_calls": usage.get("api_calls", 0) + 1,
        "input_tokens": usage.get("input_tokens", 0) + reply.input_tokens,
        "output_tokens": usage.get("output_tokens", 0) + reply.output_tokens,
        "cache_read_tokens": usage.get("cache_read_tokens", 0) + reply.cache_read_tokens,
        "cache_write_tokens": usage.get("cache_write_tokens", 0) + reply.cache_write_tokens,
        "cost": usage.get("cost", 0.0) + reply.cost,
        "estimated_calls": usage.get("estimated_calls", 0) + reply.estimated,
    }
