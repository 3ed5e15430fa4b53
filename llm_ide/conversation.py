"""One exchange of a step: what a model call sends and how its reply is read.

A call sends the system part (formats, actions, task, tool usage: fixed for the run), the memory snapshot of the
current epoch, then the turns of every operation since that snapshot; within an epoch each prompt extends the previous
one (providers serve that prefix from their cache), a new snapshot starts the next epoch. How a step asks for its reply
is chosen once per run (`replies_for`): one call whose reply opens with the verdict on the latest operation, or a
reflection call, then an act call. Where the actions are tools (llm_ide/action_tools.py), a reply carries its action
as a tool call and an operation's outcome is the call's result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from llm_ide.action_tools import reading, retry_turns, tool_outcome, tool_reply
from llm_ide.calls import Message
from llm_ide.models import Model, ScriptedModel
from llm_ide.parsing import FormatError, ParsedAction, body_text, first_sentence, joined_script
from llm_ide.prompting import render, truncate
from llm_ide.resources import AgentContext
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode, Reflection, verdict_due, with_reflection
from llm_ide.tool_calls import text_of
from llm_ide.variant import ModelCall, ModelRequest, ModelResponse

MEMO_SIZE = 64


def memo(ctx: AgentContext, key: tuple[Any, ...], make: Callable[[], str]) -> str:
    """A prompt part that never changes once made (the system part, an operation's turns), rendered once."""
    text = ctx.rendered.get(key)
    if text is None:
        if len(ctx.rendered) >= MEMO_SIZE:
            ctx.rendered.clear()
        text = ctx.rendered[key] = make()
    return text


def capped(ctx: AgentContext, sections: dict[str, str]) -> dict[str, str]:
    """Whatever the task, the code, the thoughts or the lessons hold, each prompt section has a ceiling
    (`memory.section_max_chars`; head and tail kept)."""
    caps = ctx.settings.memory.section_max_chars.model_dump()
    return {
        name: truncate(text, caps[name], ctx.templates) if name in caps else text for name, text in sections.items()
    }


def system_prompt(ctx: AgentContext, task: str, notes: str, more_actions: str) -> str:
    """`notes`: the variants' text after the task (e.g. what a script showed on the original code)."""

    def make() -> str:
        ws, templates = ctx.codebase, ctx.templates
        values = {"view_max_lines": ws.view_max_lines, "search_max_results": ws.search_max_results}
        actions = render(templates, "actions", **values, command_timeout=ws.command_timeout, more_actions=more_actions)
        sections = {
            "task": render(templates, "task", task=task) + (f"\n\n{notes}" if notes else ""),
            "tool_usage": ctx.tool_usage or render(templates, "tool_usage_empty"),
        }
        formats = {name: render(templates, name) for name in ("single_format", "reflect_format", "act_format")}
        single = replies_for(ctx.settings).joins_verdict
        return render(templates, "system", actions=actions, single=single, **formats, **capped(ctx, sections))

    return memo(ctx, ("system", task, notes, more_actions), make)


def params_text(node: OperationNode) -> str:
    return body_text(node.action_type, node.action_params)


def act_instruction(ctx: AgentContext, node: OperationNode | None) -> str:
    """Next-step after a good operation (or none), alternative-action after a bad one."""
    return render(
        ctx.templates, "alternative_action" if node is not None and node.bad_action else "next_step", node=node
    )


def action_turn(ctx: AgentContext, node: OperationNode) -> str:
    return memo(
        ctx, ("action", node.id), lambda: render(ctx.templates, "action_turn", node=node, params=params_text(node))
    )


def reflection_turn(ctx: AgentContext, node: OperationNode, following: OperationNode | None = None) -> str:
    """The verdict on `node`; opening the reply of the `following` action whose reasoning begins with the summary,
    without it (as the reply had it)."""
    brief = following is not None and node.summary == first_sentence(following.thought)
    return memo(
        ctx, ("reflection", node.id, brief), lambda: render(ctx.templates, "reflection", reflection=node, brief=brief)
    )


def judged_by_model(node: OperationNode) -> bool:
    return node.bad_action is not None and not node.judged_when_run


@dataclass(frozen=True)
class Turns:
    """The turns of one epoch: the snapshot and, for each operation since, the reply that made it and its outcome
    with the instruction that followed (news that arrived after a step right after it, so prompts only grow)."""

    ctx: AgentContext
    replies: Replies
    news: Callable[[Callable[[int], bool]], str] | None

    def inbox(self, after: Callable[[int], bool]) -> str:
        text = self.news(after) if self.news is not None else ""
        return text + "\n" if text else ""

    def instruction(self, node: OperationNode) -> str:
        """What follows an operation's outcome: the verdict it waits for, or, judged as it ran, the next action."""
        if node.judged_when_run:
            return act_instruction(self.ctx, node)
        return render(self.ctx.templates, self.replies.verdict_instruction, node=node)

    def verdict_turns(self, node: OperationNode) -> list[Message]:
        """A verdict given in a turn of its own (two calls per step), and the instruction it chose."""
        if self.replies.joins_verdict or not judged_by_model(node):
            return []
        return [
            {"role": "assistant", "content": reflection_turn(self.ctx, node)},
            {"role": "user", "content": act_instruction(self.ctx, node)},
        ]

    def reply(self, nodes: list[OperationNode], position: int) -> Message:
        """The reply that made operation `position` (opening with its verdict on the one before, in one call)."""
        node = nodes[position]
        text = action_turn(self.ctx, node)
        if position and self.replies.joins_verdict and judged_by_model(nodes[position - 1]):
            text = reflection_turn(self.ctx, nodes[position - 1], node) + "\n" + text
        return tool_reply(text, node) if self.ctx.tools else {"role": "assistant", "content": text}

    def outcome(self, node: OperationNode) -> list[Message]:
        """The outcome and the instruction after it: a user turn, or the call's result, then the user's text."""
        instruction = self.inbox(lambda step: step == node.id + 1) + self.instruction(node)
        make = lambda: render(self.ctx.templates, "observation_turn", node=node, instruction=instruction)  # noqa: E731
        text = memo(self.ctx, ("observation", node.id, instruction), make)
        return tool_outcome(node, text, instruction) if self.ctx.tools else [{"role": "user", "content": text}]

    def messages(self, nodes: list[OperationNode], snapshot: str, start: int) -> list[Message]:
        head = self.instruction(nodes[start - 1]) if start else act_instruction(self.ctx, None)
        opening = f"{snapshot}\n\n{self.inbox(lambda step: step <= start)}{head}"
        messages: list[Message] = [{"role": "user", "content": opening}]
        if start:
            messages += self.verdict_turns(nodes[start - 1])
        for position in range(start, len(nodes)):
            messages += [
                self.reply(nodes, position),
                *self.outcome(nodes[position]),
                *self.verdict_turns(nodes[position]),
            ]
        return messages


def messages_for(ctx: AgentContext, state: AgentState) -> list[Message]:
    """The messages of the step's next call; a pending format-error exchange comes last."""
    parts = ctx.variants.prompt(ctx, state)
    system = system_prompt(ctx, state["task"], parts.task_notes, parts.actions)
    turns = Turns(ctx, replies_for(ctx.settings), parts.news)
    nodes = state.get("operations", [])
    messages: list[Message] = [
        {"role": "system", "content": system},
        *turns.messages(nodes, state["snapshot"], state.get("snapshot_step", 0)),
    ]
    if retry := state.get("retry"):
        messages += retry_turns(retry["response"], retry["message"], ctx.tools)
    return messages


def prompt_chars(messages: list[Message]) -> int:
    return len(text_of(messages))


@dataclass(frozen=True)
class StepReply:
    """What the step's model call(s) gave: the verdict on the latest operation (when one was due), the next action, or
    the reply that could not be read (`failure`: the reply, why, and the format to ask for)."""

    responses: tuple[ModelResponse, ...]
    verdict: Reflection | None = None
    action: ParsedAction | None = None
    failure: tuple[str, FormatError, str] | None = None


class OneCall:
    """One call per step: its reply opens with the verdict on the latest operation, then the next action."""

    joins_verdict = True
    verdict_instruction = "single_step"

    def prepare(self, model: Model) -> Model:
        """A script written for two calls per step plays in one (a reflection joins the reply after it)."""
        return model.with_responses(joined_script(model.responses)) if isinstance(model, ScriptedModel) else model

    def reply(self, ctx: AgentContext, state: AgentState, call: ModelCall) -> StepReply:
        judging, form = verdict_due(state.get("operations", [])), reading(ctx)
        read: Callable[[str], Any] = partial(form.single if judging else form.action, grammar=ctx.grammar)
        response = call(ModelRequest("act", messages_for(ctx, state), parse=read, tools=form.tools))
        try:
            parsed = read(response.text)
        except FormatError as error:
            return StepReply((response,), failure=(response.text, error, "single_format" if judging else "act_format"))
        return StepReply((response,), *parsed) if judging else StepReply((response,), action=parsed)


class TwoCalls:
    """Two calls per step: the reflection on the latest operation, then the next action under the instruction its
    verdict chose."""

    joins_verdict = False
    verdict_instruction = "reflect"

    def prepare(self, model: Model) -> Model:
        return model

    def reply(self, ctx: AgentContext, state: AgentState, call: ModelCall) -> StepReply:
        responses: tuple[ModelResponse, ...] = ()
        verdict, form = None, reading(ctx)
        nodes = state.get("operations", [])
        if verdict_due(nodes):
            response = call(ModelRequest("reflect", messages_for(ctx, state), parse=form.reflection, tools=form.tools))
            responses = (response,)
            try:
                verdict = form.reflection(response.text)
            except FormatError as error:
                return StepReply(responses, failure=(response.text, error, "reflect_format"))
            state = {**state, "operations": with_reflection(nodes, verdict), "retry": None}
        read = partial(form.action, grammar=ctx.grammar)
        response = call(ModelRequest("act", messages_for(ctx, state), parse=read, tools=form.tools))
        try:
            return StepReply((*responses, response), verdict, read(response.text))
        except FormatError as error:
            return StepReply((*responses, response), verdict, failure=(response.text, error, "act_format"))


Replies = OneCall | TwoCalls
ONE_CALL, TWO_CALLS = OneCall(), TwoCalls()


def replies_for(settings: Any) -> Replies:
    """How the run's steps ask for their reply (`agent.single_call`)."""
    return ONE_CALL if settings.agent.single_call else TWO_CALLS
