"""At an epoch's start, the snapshot the prompts build on: renewed when it pays at the model's prices; until then the
prompt grows as full history's would. The ledger weighs it: what the memory's prompts cost against full history's (the
run never renewed), in uncached prompt characters at the model's own prices, from the state alone (an operation's turns
are its thought, action and output with their headings, an epoch's opening its snapshot)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.conversation import params_text, params_texts, system_prompt
from llm_ide.nodes.snapshot import Reading, base, code_context_text, compose
from llm_ide.secrets import redact
from llm_ide.state.graph_state import AgentState, MemoryBase
from llm_ide.state.operations import OperationNode
from llm_ide.text import shared_start
from llm_ide.variant import AgentContext

__all__ = ["code_context_text", "render_context", "snapshot_text"]

RENEW_AT = 0.9  # of the prompt budget: a prompt past it starts a new epoch
MIN_EPOCH = 2  # operations an epoch lasts at least (but for the prompt budget): the latest output is read twice
BRIEF = 200  # characters of an operation in brief in the history, about the least
TURN_CHARS = 100  # an operation's turns beside its thought, action and output: verdict, tags, headings, instruction
REPLY_CHARS = 20  # a reply's beside its thought and action: the verdict and the tags
PAYBACK = 3  # calls after a renewal whose savings it may count on (a run rarely ends within three steps of one)

Renewal = tuple[str, MemoryBase]  # the new snapshot and its base


def turn_chars(node: OperationNode, params: int | None = None) -> int:
    """About what an operation's turns send: the reply that made it and its outcome (`params`: its action's)."""
    params = len(params_text(node)) if params is None else params
    return len(node.thought) + params + len(node.lessons) + len(node.observation) + TURN_CHARS


def reply_chars(node: OperationNode, params: int) -> int:
    return len(node.thought) + params + len(node.lessons) + REPLY_CHARS


@dataclass(frozen=True)
class Ledger:
    """The current epoch, and the memory's prompts against full history's: the run's first snapshot, then every
    operation's turns appended. Sizes leave the system part out: both send it whole at every call."""

    reread: float  # a re-read character's price, an uncached one's being 1
    output: float  # a reply character's
    turns: list[int]  # each operation's turns
    replies: list[int]  # each operation's reply
    start: int  # the step the epoch began at
    opening: int  # the epoch's snapshot
    first: int  # the run's first snapshot
    balance: float  # the memory's cost less full history's, after the epoch's first call
    calls: float  # model calls per step

    @classmethod
    def of(cls, ctx: AgentContext, state: AgentState, old: MemoryBase) -> Ledger:
        (reread, output), nodes = ctx.rates, state.get("operations", [])
        params = [len(text) for text in params_texts(ctx.memo, nodes)]
        steps, usage = len(nodes), state.get("usage")
        return cls(
            reread=reread,
            output=output,
            turns=[turn_chars(node, length) for node, length in zip(nodes, params, strict=True)],
            replies=[reply_chars(node, length) for node, length in zip(nodes, params, strict=True)],
            start=min(state.get("snapshot_step", 0), steps),
            opening=len(state.get("snapshot", "")),
            first=old.get("first") or len(old["text"]),
            balance=old.get("balance", 0.0),
            calls=max(1.0, usage["api_calls"] / steps) if usage and steps else 1.0,
        )

    @cached_property
    def history(self) -> list[int]:
        """Full history's prompt at each step's call (the first snapshot and the turns of the operations before)."""
        return list(accumulate(self.turns, initial=self.first))

    @property
    def step(self) -> int:
        return len(self.turns)

    @property
    def latest(self) -> int:
        return self.turns[-1] if self.turns else 0

    @property
    def epoch(self) -> int:
        """The epoch's prompt for the call to come: its snapshot and the turns since."""
        return self.opening + sum(self.turns[self.start :])

    def deficit(self) -> float:
        """The memory's cost less full history's so far (a call re-reads the snapshot, the other what it replaced)."""
        later = max(0, self.step - self.start - 1) * self.calls
        return self.balance + self.reread * later * (self.opening - self.history[self.start])

    def after(self, length: int, uncached: int) -> float:
        """The deficit once the call to come has sent a snapshot of `length` characters, `uncached` of them new."""
        appended = self.latest + self.reread * (self.history[self.step] - self.latest)  # full history's call
        return self.deficit() + uncached + self.reread * (length - uncached) - appended

    @cached_property
    def bill(self) -> float:
        """Full history's bill up to the call to come: first snapshot, each call's new turns and re-reads, replies."""
        calls = zip(self.turns, self.history[:-1], strict=True)
        prompts = sum(turn + self.reread * self.calls * before for turn, before in calls)
        return self.first + prompts + self.output * sum(self.replies)

    def renewed(self, old: str, new: str) -> float:
        """The deficit once the call to come has sent the snapshot `new` for `old` (their shared prefix re-read)."""
        return self.after(len(new), len(new) - shared_start(old, new))

    def allows(self, deficit: float, length: int, overspend: float) -> bool:
        """Whether a renewal to a snapshot of `length` characters leaving `deficit` keeps the memory within `overspend`
        of full history's bill, once its next PAYBACK calls have saved what they re-read less."""
        saved = PAYBACK * self.reread * self.calls * max(0, self.history[self.step] - length)
        return deficit - saved <= overspend * self.bill

    def dropped(self) -> float:
        """What the re-reads of the epoch's turns have cost since each was new, counting the call to come."""
        reads = sum(size * (self.step - 1 - i) for i, size in enumerate(self.turns) if i >= self.start)
        return self.reread * self.calls * reads


def new_chars(old: str, new: str, latest: int) -> int:
    """What sending the snapshot `new` for `old` sends uncached, but the `latest` characters the turns send anyway."""
    return max(0, len(new) - shared_start(old, new) - latest)


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
