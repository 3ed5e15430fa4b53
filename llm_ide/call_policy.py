"""The one way a model is called, whoever calls it (the agent's nodes, a variant's, a reviewer, a planner): the
messages with every known secret masked, room in the shared budget taken before the call (none left: the run ends
with `cost_limit`), the reply masked and capped, the call recorded and charged, its usage counted. Retries, timeouts
and deadlines are the model's own (llm_ide/models.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from llm_ide.budget import Budget, admitted
from llm_ide.models import Message, Model, ModelReply
from llm_ide.prompting import truncate
from llm_ide.secrets import known_secrets, redact
from llm_ide.settings import Templates

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

    def recording(self, record: Recorder | None) -> CallPolicy:
        """The same policy (budget, cap, masking) with calls recorded elsewhere (a variant's own list)."""
        return replace(self, record=record, masked={})

    def mask(self, messages: Sequence[Message]) -> list[Message]:
        """The messages with every known secret masked; a message already seen (most of a conversation is the
        previous call's) is not scanned again."""
        secrets = tuple(known_secrets())
        seen = self.masked
        if len(seen) > 4 * len(messages) + 16:
            seen.clear()
        out = []
        for message in messages:
            key = (message["content"], secrets)
            if key not in seen:
                seen[key] = redact(message["content"], list(secrets))
            out.append({**message, "content": seen[key]})
        return out

    def call(
        self, model: Model, messages: Sequence[Message], /, *, kind: str, call_index: int,
        deadline: float | None = None, **fields: Any,
    ) -> tuple[ModelReply, dict[str, Any]]:  # fmt: skip
        """One call (the model's `call_index`-th): the reply (masked, capped) and its record; `fields` lead the record
        (its index, step, attempt…)."""
        masked = self.mask(messages)
        started = time.perf_counter()
        with admitted(self.budget) as reservation:  # a shared budget with no room left ends the run (cost_limit)
            reply = model.complete(masked, call_index=call_index, deadline=deadline)
        return self.settle(model, masked, reply, started, reservation, kind=kind, **fields)

    def settle(
        self, model: Model, masked: Sequence[Message], reply: ModelReply, started: float, reservation: Any = 0.0, /,
        *, kind: str, **fields: Any,
    ) -> tuple[ModelReply, dict[str, Any]]:  # fmt: skip
        """A reply the caller got itself (several calls at once, one request for n replies): masked, capped, recorded,
        charged (settling the budget's `reservation` for it)."""
        reply = replace(reply, text=self.capped(redact(reply.text)))  # a key the endpoint echoes is never stored
        record = {
            **fields,
            "kind": kind,
            "prompt": "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in masked),
            "prompt_chars": sum(len(m["content"]) for m in masked),
            "prompt_tokens": reply.input_tokens,
            "response": reply.text,
            "response_tokens": reply.output_tokens,
            "cache_read_tokens": reply.cache_read_tokens,
            "cache_write_tokens": reply.cache_write_tokens,
            "cost": reply.cost,
            "seconds": round(time.perf_counter() - started, 3),
            **({"reported_usage": reply.reported_usage} if reply.reported_usage else {}),
            **({"usage_estimated": True} if reply.estimated else {}),  # the tokens and cost are estimates
            **({"finish_reason": reply.finish_reason} if reply.finish_reason not in (None, "stop") else {}),
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
