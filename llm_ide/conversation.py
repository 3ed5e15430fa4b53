"""What a step's model call sends: the system part (formats, actions, task, tool usage: fixed for the run;
system_part.py), the memory snapshot of the current epoch, then the turns of every operation since that snapshot;
within an epoch each prompt extends the previous one (providers serve that prefix from their cache), a new snapshot
starts the next epoch. The run's exchange (llm_ide/exchange.py) gives what depends on how the run talks to its model:
an operation's reply and outcome as messages, a rejected reply's turns; the verdicts shown are the verdict module's
(llm_ide/verdict.py)."""

from __future__ import annotations

from collections.abc import Callable
from copy import deepcopy
from dataclasses import dataclass, field, replace

from llm_ide import verdict
from llm_ide.calls import Message
from llm_ide.parsing import body_text
from llm_ide.prompting import ROW, render, rows_elided
from llm_ide.state.graph_state import AgentState, operations_now
from llm_ide.state.operations import VERDICT_PARTS, OperationNode
from llm_ide.system_part import system_part
from llm_ide.variant import AgentContext, Memo


def system_prompt(ctx: AgentContext, task: str, notes: str, more_actions: str) -> str:
    """The system part (system_part.py), made once for the run's task and its variants' notes."""
    return ctx.memo.get(("system", task, notes, more_actions), lambda: system_part(ctx, task, notes, more_actions))


def params_text(node: OperationNode) -> str:
    return body_text(node.action_type, node.action_params)


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


def action_turn(ctx: AgentContext, node: OperationNode) -> str:
    return ctx.memo.get(
        ("action", node.id), lambda: render(ctx.templates, "action_turn", node=node, params=params_text(node))
    )


@dataclass
class Shown:
    """The numbered rows an epoch has shown: its snapshot's, then each operation's output in turn, kept from call to
    call (a new outcome reads the outputs since the last one, not the whole epoch again)."""

    snapshot: str
    start: int
    outputs: list[tuple[int, str]] = field(default_factory=list)
    rows: set[str] = field(default_factory=set)

    def through(self, nodes: list[OperationNode]) -> set[str]:
        """The rows of the snapshot and of `nodes`' outputs (the epoch's operations up to one)."""
        known = len(self.outputs)
        if self.outputs != [(node.id, node.observation) for node in nodes[:known]] or not known:
            self.outputs, self.rows, known = [], numbered_rows(self.snapshot), 0
        self.outputs += [(node.id, node.observation) for node in nodes[known:]]
        self.rows.update(row for node in nodes[known:] for row in numbered_rows(node.observation))
        return self.rows


def numbered_rows(text: str) -> set[str]:
    return {line for line in text.split("\n") if ROW.match(line)}


@dataclass(frozen=True)
class Turns:
    """The turns of one epoch: the snapshot and, for each operation since, the reply that made it and its outcome
    with the instruction that followed (news that arrived after a step right after it, so prompts only grow)."""

    ctx: AgentContext
    news: Callable[[Callable[[int], bool]], str] | None

    def inbox(self, after: Callable[[int], bool]) -> str:
        text = self.news(after) if self.news is not None else ""
        return text + "\n" if text else ""

    def said(self, node: OperationNode, following: OperationNode | None = None) -> str:
        key = ("verdict", node.id, following is not None)
        return self.ctx.memo.get(
            key, lambda: verdict.said(self.ctx.templates, node, None if following is None else following.thought)
        )

    def verdict_turns(self, node: OperationNode) -> list[Message]:
        """A verdict given in a turn of its own (two calls per step), and the instruction it chose."""
        if self.ctx.exchange.one_call or not verdict.by_model(node):
            return []
        return [
            {"role": "assistant", "content": self.said(node)},
            {"role": "user", "content": verdict.instruction(self.ctx.templates, node)},
        ]

    def reply(self, nodes: list[OperationNode], position: int) -> Message:
        """The reply that made operation `position` (opening with its verdict on the one before, in one call)."""
        node = nodes[position]
        text = action_turn(self.ctx, node)
        if position and self.ctx.exchange.one_call and verdict.by_model(nodes[position - 1]):
            text = self.said(nodes[position - 1], node) + "\n" + text
        return self.ctx.exchange.form.reply_message(text, node)

    def asked(self, node: OperationNode) -> str:
        key = ("asked", node.id, *(getattr(node, part) for part in VERDICT_PARTS))  # its verdict may come later
        make = lambda: verdict.asked(self.ctx.templates, node, self.ctx.exchange.verdict_instruction)  # noqa: E731
        return self.ctx.memo.get(key, make)

    def outcome(self, nodes: list[OperationNode], position: int, shown: Shown, epoch: int) -> list[Message]:
        """The outcome (rows the epoch showed before it as one line) and the instruction after it."""
        node = nodes[position]
        instruction = self.inbox(lambda step: step == node.id + 1) + self.asked(node)

        def make() -> str:
            rows = shown.through(nodes[shown.start : position])
            seen = replace(node, observation=rows_elided(node.observation, rows, self.ctx.templates, context=False))
            return render(self.ctx.templates, "observation_turn", node=seen, instruction=instruction)

        text = self.ctx.memo.get(("observation", node.id, instruction, epoch), make)
        return self.ctx.exchange.form.outcome(node, text, instruction)

    def messages(self, nodes: list[OperationNode], snapshot: str, start: int) -> list[Message]:
        head = self.asked(nodes[start - 1]) if start else verdict.instruction(self.ctx.templates, None)
        opening = f"{snapshot}\n\n{self.inbox(lambda step: step <= start)}{head}"
        messages: list[Message] = [{"role": "user", "content": opening}]
        if start:
            messages += self.verdict_turns(nodes[start - 1])
        epoch = hash((start, snapshot))
        shown = self.ctx.memo.get(("shown", epoch), lambda: Shown(snapshot, start))
        for position in range(start, len(nodes)):
            messages += [
                self.reply(nodes, position),
                *self.outcome(nodes, position, shown, epoch),
                *self.verdict_turns(nodes[position]),
            ]
        return messages


def messages_for(ctx: AgentContext, state: AgentState) -> list[Message]:
    """The messages of the step's next call (what the renewal of the memory measures too); a reply rejected in this
    step comes last, with why."""
    parts = ctx.variants.prompt(ctx, state)
    system = system_prompt(ctx, state["task"], parts.task_notes, parts.actions)
    nodes = operations_now(state)
    messages: list[Message] = [
        {"role": "system", "content": system},
        *Turns(ctx, parts.news).messages(nodes, state["snapshot"], state.get("snapshot_step", 0)),
    ]
    if retry := state.get("retry"):
        messages += ctx.exchange.form.rejected(retry)
    return messages
