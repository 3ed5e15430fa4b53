"""At an epoch's start, the snapshot the prompts build on: renewed when it pays at the model's prices (ledger.py); until
then the prompt grows as full history's would."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide.conversation import system_prompt
from llm_ide.nodes.ledger import Ledger, new_chars
from llm_ide.nodes.snapshot import Reading, base, code_context_text, compose
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
    return full(Reading(ctx, state))[0]


def full(now: Reading, previous: MemoryBase | None = None) -> Renewal:
    text, since = compose(now, fresh := base(now, previous))
    return text, {**fresh, "since": since}


def settled(ledger: Ledger, old: str, text: str, kept: MemoryBase) -> Renewal:
    """The renewal to `text` with the ledger as it will be after its call."""
    return text, {**kept, "first": ledger.first, "balance": ledger.renewed(old, text)}


def renewal(ctx: AgentContext, state: AgentState) -> Renewal | None:
    """The snapshot a new epoch starts with, or None while the current one goes on: at the first step, when asked,
    every `snapshot_every` operations if set; past `renew_at_chars`, once the re-reads of what it would drop have cost
    `renew_ratio` times its price (full, or keeping the base), while the memory's bill stays within `overspend` of
    full history's (memory settings in default.yaml); always before the prompt nears its budget."""
    memory, old = ctx.settings.memory, state.get("snapshot_base")
    if old is None:
        text, fresh = full(Reading(ctx, state))
        return text, {**fresh, "first": len(text), "balance": 0.0}
    ledger, snapshot = Ledger.of(ctx, state, old), state.get("snapshot", "")
    since = ledger.step - ledger.start
    if not snapshot or (memory.snapshot_every and since >= memory.snapshot_every):
        return settled(ledger, snapshot, *full(Reading(ctx, state)))
    parts = ctx.variants.prompt(ctx, state)
    size = len(system_prompt(ctx, state["task"], parts.task_notes, parts.actions)) + ledger.epoch
    forced = size > RENEW_AT * memory.prompt_budget_chars
    if not forced and (size <= memory.renew_at_chars or since < MIN_EPOCH):
        return None
    p, calls = ledger.reread, since * ledger.calls
    latest_old = len(snapshot) - len(old["text"]) - old["since"]  # dropped by any renewal, like the turns
    dropped = ledger.dropped() + p * latest_old * calls
    followed = old["held"] + p * old["since"] * calls  # dropped by a full renewal only
    least = max(old["since"], BRIEF * (ledger.step - old["step"]))  # what came since, at least
    limit = memory.renew_ratio * (1 - p)
    cheapest = ledger.after(len(old["text"]) + least, least)  # the ledger after a renewal keeping the base, at least
    if not forced and (
        (dropped + followed < limit * len(old["text"]) and dropped < limit * least)
        or not ledger.allows(cheapest, len(old["text"]) + least, memory.overspend)
    ):
        return None  # neither can pay yet (either would send at least about this much): nothing rendered
    renewed = settled(ledger, snapshot, *full(now := Reading(ctx, state), old))  # its reads kept for the next
    price = (1 - p) * new_chars(snapshot, renewed[0], ledger.latest)
    if forced or (
        dropped + followed >= memory.renew_ratio * price
        and ledger.allows(renewed[1]["balance"], len(renewed[0]), memory.overspend)
    ):
        return renewed
    text, length = compose(now, old)
    price = (1 - p) * new_chars(snapshot, text, ledger.latest)
    deficit = ledger.renewed(snapshot, text)
    if dropped >= memory.renew_ratio * price and ledger.allows(deficit, len(text), memory.overspend):
        return text, {**old, "since": length, "held": followed, "balance": deficit}
    return None


def render_context(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """At the start of an epoch, render the memory snapshot the prompts build on."""
    with runtime.context.codebase.view.held():  # each file read once: no command runs meanwhile
        renewed = renewal(runtime.context, state)
    if renewed is None:
        return {}
    snapshot, kept_base = renewed
    update = {"snapshot": redact(snapshot), "snapshot_step": state.get("n_operations", 0)}  # files may hold secrets
    return update | {"snapshot_base": {**kept_base, "text": redact(kept_base["text"])}}
