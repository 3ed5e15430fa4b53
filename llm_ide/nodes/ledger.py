"""What the memory's prompts cost against full history's (the run never renewed), in uncached prompt characters at
the model's own prices, from the state alone: an operation's turns are its thought, action and output with their
headings, an epoch's opening its snapshot."""

from __future__ import annotations

from copy import deepcopy
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate

from llm_ide.conversation import params_text
from llm_ide.state.graph_state import AgentState, MemoryBase
from llm_ide.state.operations import OperationNode
from llm_ide.text import shared_start
from llm_ide.variant import AgentContext, Memo

TURN_CHARS = 100  # an operation's turns beside its thought, action and output: verdict, tags, headings, instruction
REPLY_CHARS = 20  # a reply's beside its thought and action: the verdict and the tags
PAYBACK = 3  # calls after a renewal whose savings it may count on (a run rarely ends within three steps of one)


def turn_chars(node: OperationNode, params: int | None = None) -> int:
    """About what an operation's turns send: the reply that made it and its outcome (`params`: its action's)."""
    params = len(params_text(node)) if params is None else params
    return len(node.thought) + params + len(node.lessons) + len(node.observation) + TURN_CHARS


def reply_chars(node: OperationNode, params: int) -> int:
    return len(node.thought) + params + len(node.lessons) + REPLY_CHARS


def params_texts(memo: Memo, nodes: list[OperationNode]) -> list[str]:
    """Each operation's action text, written once (exact: kept by id with a deep copy of the action written from)."""
    known = memo.get(("params",), dict)  # id -> (action type, its parameters, their text)
    texts = []
    for node in nodes:
        kept = known.get(node.id)
        if kept is None or kept[0] != node.action_type or kept[1] != node.action_params:
            kept = known[node.id] = (node.action_type, deepcopy(node.action_params), params_text(node))
        texts.append(kept[2])
    return texts


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
