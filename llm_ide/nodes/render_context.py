from __future__ import annotations

import os
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.calls import Message, prompt_chars
from llm_ide.conversation import messages_for
from llm_ide.nodes.snapshot import base, code_context_text, compose
from llm_ide.secrets import redact
from llm_ide.state.graph_state import AgentState, MemoryBase
from llm_ide.variant import AgentContext

__all__ = ["code_context_text", "render_context", "snapshot_text"]

RENEW_AT = 0.9  # of the prompt budget: a prompt past it starts a new epoch
MIN_EPOCH = 2  # operations an epoch lasts at least (but for the prompt budget): the latest output is read twice
BRIEF = 200  # characters of an operation in brief in the history, about the least

Renewal = tuple[str, MemoryBase]  # the new snapshot and its base


def snapshot_text(ctx: AgentContext, state: AgentState) -> str:
    """A fresh snapshot of the memory as it is now (what a full renewal would send)."""
    return full(ctx, state)[0]


def full(ctx: AgentContext, state: AgentState, previous: MemoryBase | None = None) -> Renewal:
    fresh = base(ctx, state, previous)
    text, since = compose(ctx, state, fresh)
    return text, {**fresh, "since": since}


def rereads(messages: list[Message]) -> list[int]:
    """How often each message after the snapshot's has been sent again since it was new, counting the call to come
    (each later reply stands for one call whose prompt held it)."""
    counts, replies = [], 0
    for message in reversed(messages[2:]):
        counts.append(replies)
        replies += message["role"] == "assistant"
    return counts[::-1]


def cost(ctx: AgentContext, first: str, new: str, latest: int) -> float:
    """What sending the snapshot `new` costs beyond the turns it replaces, as uncached characters: what it does not
    share with the epoch's first message `first` is uncached, but for the `latest` characters, new anyway."""
    cached = ctx.settings.memory.cached_price
    return (1 - cached) * max(0, len(new) - len(os.path.commonprefix([first, new])) - latest)


def renewal(ctx: AgentContext, state: AgentState) -> Renewal | None:
    """The snapshot a new epoch starts with, or None while the current one goes on. A full renewal at the first step,
    when asked (`snapshot` emptied), every `snapshot_every` operations if set. Past `renew_at_chars` of prompt, as
    soon as the re-reads (cached) of what a renewal would drop have cost `renew_ratio` times what it costs (the
    economic order quantity: a renewal every n steps costs its price once and re-reads growing with n): a full one
    when the turns since the snapshot and what followed the base have, else one keeping the base (the cache serves
    it) when the turns have. Always one before the prompt nears its budget."""
    memory = ctx.settings.memory
    since = state.get("n_operations", 0) - state.get("snapshot_step", 0)
    old = state.get("snapshot_base")
    if not state.get("snapshot") or old is None or (memory.snapshot_every and since >= memory.snapshot_every):
        return full(ctx, state)
    messages = messages_for(ctx, state)
    size = prompt_chars(messages)
    ceiling = RENEW_AT * memory.prompt_budget_chars
    if size <= ceiling and (size <= memory.renew_at_chars or since < MIN_EPOCH):
        return None
    price, turns = memory.cached_price, messages[2:]
    calls = sum(message["role"] == "assistant" for message in turns)
    latest_old = len(state["snapshot"]) - len(old["text"]) - old["since"]  # dropped by any renewal, like the turns
    dropped = price * (
        sum(len(m["content"]) * n for m, n in zip(turns, rereads(messages), strict=True)) + latest_old * calls
    )
    followed = old["held"] + price * old["since"] * calls  # dropped by a full renewal only
    least = max(old["since"], BRIEF * (state.get("n_operations", 0) - old["step"]))  # what came since, at least
    limit = memory.renew_ratio * (1 - price)
    if size <= ceiling and dropped + followed < limit * len(old["text"]) and dropped < limit * least:
        return None  # neither can pay yet (either would send at least about this much): nothing rendered
    first, latest = messages[1]["content"], sum(len(m["content"]) for m in turns[-2:])
    renewed = full(ctx, state, old)
    if size > ceiling or dropped + followed >= memory.renew_ratio * cost(ctx, first, renewed[0], latest):
        return renewed
    text, length = compose(ctx, state, old)
    if dropped >= memory.renew_ratio * cost(ctx, first, text, latest):
        return text, {**old, "since": length, "held": followed}
    return None


def render_context(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """At the start of an epoch, render the memory snapshot the prompts build on."""
    renewed = renewal(runtime.context, state)
    if renewed is None:
        return {}
    snapshot, kept_base = renewed
    update = {"snapshot": redact(snapshot), "snapshot_step": state.get("n_operations", 0)}  # files may hold secrets
    return update | {"snapshot_base": {**kept_base, "text": redact(kept_base["text"])}}
