"""What a model call sends: the system part (formats, actions, task, tool usage: fixed for the run), the memory
snapshot of the current epoch, then the turns of every operation since that snapshot. Within an epoch each prompt
extends the previous one (providers serve that prefix from their cache); a new snapshot starts the next epoch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llm_ide.parsing import body_text, first_sentence
from llm_ide.prompting import render, truncate
from llm_ide.resources import AgentContext
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode, with_reflection

Message = dict[str, str]
MEMO_SIZE = 64


def memo(ctx: AgentContext, key: tuple[Any, ...], make: Callable[[], str]) -> str:
    """A prompt part that never changes once made (the system part, an operation's turns), rendered once."""
    text = ctx.rendered.get(key)
    if text is None:
        if len(ctx.rendered) >= MEMO_SIZE:
            ctx.rendered.clear()
        text = ctx.rendered[key] = make()
    return text


def system_prompt(ctx: AgentContext, task: str, notes: str = "") -> str:
    """`notes`: the variants' text after the task in its section (e.g. what a script showed on the original code)."""
    return memo(ctx, ("system", task, notes), lambda: render_system(ctx, task, notes))


def render_system(ctx: AgentContext, task: str, notes: str = "") -> str:
    ws = ctx.codebase
    templates = ctx.templates
    actions = render(
        templates,
        "actions",
        view_max_lines=ws.view_max_lines,
        search_max_results=ws.search_max_results,
        command_timeout=ws.command_timeout,
        more_actions=ctx.variants.action_lines(ctx),
    )
    return render(
        templates,
        "system",
        actions=actions,
        additions=ctx.variants.system_sections(ctx),
        single=ctx.settings.agent.single_call,
        single_format=render(templates, "single_format"),
        reflect_format=render(templates, "reflect_format"),
        act_format=render(templates, "act_format"),
        **capped(
            ctx,
            {
                "task": render(templates, "task", task=task) + (f"\n\n{notes}" if notes else ""),
                "tool_usage": ctx.tool_usage or render(templates, "tool_usage_empty"),
            },
        ),
    )


def capped(ctx: AgentContext, sections: dict[str, str]) -> dict[str, str]:
    """Whatever the task, the code, the thoughts or the lessons hold, each prompt section has a ceiling
    (`memory.section_max_chars`; head and tail kept)."""
    caps = ctx.settings.memory.section_max_chars.model_dump()
    return {
        name: truncate(text, caps[name], ctx.templates) if name in caps else text for name, text in sections.items()
    }


def act_template(node: OperationNode | None) -> str:
    """The template of the act instruction: next-step after a good operation (or none), alternative-action after a
    bad one."""
    return "alternative_action" if node is not None and node.bad_action else "next_step"


def act_instruction(ctx: AgentContext, node: OperationNode | None) -> str:
    return render(ctx.templates, act_template(node), node=node)


def params_text(node: OperationNode) -> str:
    return body_text(node.action_type, node.action_params)


def action_turn(ctx: AgentContext, node: OperationNode) -> str:
    return memo(
        ctx, ("action", node.id), lambda: render(ctx.templates, "action_turn", node=node, params=params_text(node))
    )


def observation_turn(ctx: AgentContext, node: OperationNode, instruction: str, inbox: str = "") -> str:
    """`inbox`: what arrived after this operation (the variants' news), before the instruction."""

    def make() -> str:
        text = render(ctx.templates, instruction, node=node)
        return render(ctx.templates, "observation_turn", node=node, instruction=inbox + text)

    return memo(ctx, ("observation", node.id, instruction, inbox), make)


def inbox_text(ctx: AgentContext, state: AgentState, after: Callable[[int], bool]) -> str:
    """What the variants tell of the news that arrived after the steps `after` accepts (e.g. another agent's
    messages). News stays where it arrived: after its operation's observation, or after the snapshot of a later epoch,
    so each prompt still extends the previous one."""
    text = ctx.variants.news(ctx, state, after) if ctx.variants else ""
    return text + "\n" if text else ""


def reflection_turn(ctx: AgentContext, node: OperationNode, following: OperationNode | None = None) -> str:
    """The reflection on `node`; in a single-call reply before the `following` action whose reasoning begins with
    the summary, the verdict without it (as the reply had it)."""
    brief = following is not None and node.summary == first_sentence(following.thought)
    return memo(
        ctx, ("reflection", node.id, brief), lambda: render(ctx.templates, "reflection", reflection=node, brief=brief)
    )


def turns(ctx: AgentContext, nodes: list[OperationNode], snapshot: str, start: int, state: AgentState) -> list[Message]:
    """The snapshot (taken after `start` operations) and the turns since: each operation's action and observation
    with the request to reflect on it, and, once reflected, the reflection and the request for the next action."""
    head = act_instruction(ctx, None) if start == 0 else render(ctx.templates, "reflect", node=nodes[start - 1])
    inbox = inbox_text(ctx, state, lambda step: step <= start)
    messages = [{"role": "user", "content": f"{snapshot}\n\n{inbox}{head}"}]
    for position in range(max(start - 1, 0), len(nodes)):
        node = nodes[position]
        if position >= start:
            inbox = inbox_text(ctx, state, lambda step, done=position + 1: step == done)
            messages += [
                {"role": "assistant", "content": action_turn(ctx, node)},
                {"role": "user", "content": observation_turn(ctx, node, "reflect", inbox)},
            ]
        if node.bad_action is not None:
            messages += [
                {"role": "assistant", "content": reflection_turn(ctx, node)},
                {"role": "user", "content": act_instruction(ctx, node)},
            ]
    return messages


def single_call_turns(
    ctx: AgentContext, nodes: list[OperationNode], snapshot: str, start: int, state: AgentState
) -> list[Message]:
    """`agent.single_call`: one reply per step holds the reflection on the latest operation and the next action (an
    operation judged as it ran is followed by the act instruction its verdict chose, and a reply of the action
    alone)."""

    def instruction(node: OperationNode) -> str:
        return act_template(node) if node.judged_when_run else "single_step"

    head = (
        act_instruction(ctx, None)
        if start == 0
        else render(ctx.templates, instruction(nodes[start - 1]), node=nodes[start - 1])
    )
    inbox = inbox_text(ctx, state, lambda step: step <= start)
    messages = [{"role": "user", "content": f"{snapshot}\n\n{inbox}{head}"}]
    for position in range(start, len(nodes)):
        node = nodes[position]
        reply = action_turn(ctx, node)
        if position > 0 and not nodes[position - 1].judged_when_run:
            reply = reflection_turn(ctx, nodes[position - 1], node) + "\n" + reply
        inbox = inbox_text(ctx, state, lambda step, done=position + 1: step == done)
        messages += [
            {"role": "assistant", "content": reply},
            {"role": "user", "content": observation_turn(ctx, node, instruction(node), inbox)},
        ]
    return messages


def messages_for(ctx: AgentContext, state: AgentState, with_pending_reflection: bool) -> list[Message]:
    """The messages of the reflect call, or (with the pending reflection) of the act call that continues it; a
    pending format-error exchange comes last."""
    nodes = state.get("operations", [])
    if with_pending_reflection:
        nodes = with_reflection(nodes, state.get("reflection"))
    build = single_call_turns if ctx.settings.agent.single_call else turns
    messages = [
        {"role": "system", "content": system_prompt(ctx, state["task"], ctx.variants.task_notes(ctx, state))},
        *build(ctx, nodes, state["snapshot"], state.get("snapshot_step", 0), state),
    ]
    if retry := state.get("retry"):
        messages += [{"role": "assistant", "content": retry["response"]}, {"role": "user", "content": retry["message"]}]
    return messages


def prompt_chars(messages: list[Message]) -> int:
    return sum(len(message["content"]) for message in messages)
