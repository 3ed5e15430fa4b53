"""What a model call sends: the system part (formats, actions, task, tool usage: fixed for the run), the memory
snapshot of the current epoch, then the turns of every operation since that snapshot. Within an epoch each prompt
extends the previous one (providers serve that prefix from their cache); a new snapshot starts the next epoch."""

from __future__ import annotations

import json

from llm_ide.prompting import render
from llm_ide.resources import AgentContext
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode, with_reflection

Message = dict[str, str]


def system_prompt(ctx: AgentContext, task: str) -> str:
    ws = ctx.workspace
    templates = ctx.templates
    actions = render(
        templates,
        "actions",
        view_max_lines=ws.view_max_lines,
        search_max_results=ws.search_max_results,
        command_timeout=ws.command_timeout,
    )
    return render(
        templates,
        "system",
        actions=actions,
        reflect_format=render(templates, "reflect_format"),
        act_format=render(templates, "act_format"),
        task=render(templates, "task", task=task),
        tool_usage=ctx.tool_usage or render(templates, "tool_usage_empty"),
    )


def act_instruction(ctx: AgentContext, node: OperationNode | None) -> str:
    """The next-step template after a good operation (or none), the alternative-action one after a bad one."""
    template = "alternative_action" if node is not None and node.bad_action else "next_step"
    return render(ctx.templates, template, node=node)


def params_text(node: OperationNode) -> str:
    return json.dumps(node.action_params, ensure_ascii=False)


def turns(ctx: AgentContext, nodes: list[OperationNode], snapshot: str, start: int) -> list[Message]:
    """The snapshot (taken after `start` operations) and the turns since: each operation's action and observation
    with the request to reflect on it, and, once reflected, the reflection and the request for the next action."""
    templates = ctx.templates
    head = act_instruction(ctx, None) if start == 0 else render(templates, "reflect", node=nodes[start - 1])
    messages = [{"role": "user", "content": f"{snapshot}\n\n{head}"}]
    for position in range(max(start - 1, 0), len(nodes)):
        node = nodes[position]
        if position >= start:
            action = render(templates, "action_turn", node=node, params=params_text(node))
            observation = render(
                templates, "observation_turn", node=node, instruction=render(templates, "reflect", node=node)
            )
            messages += [{"role": "assistant", "content": action}, {"role": "user", "content": observation}]
        if node.bad_action is not None:
            reflection = render(templates, "reflection", reflection=node)
            messages += [
                {"role": "assistant", "content": reflection},
                {"role": "user", "content": act_instruction(ctx, node)},
            ]
    return messages


def single_call_turns(ctx: AgentContext, nodes: list[OperationNode], snapshot: str, start: int) -> list[Message]:
    """`agent.single_call`: one reply per step holds the reflection on the latest operation and the next action."""
    templates = ctx.templates
    head = act_instruction(ctx, None) if start == 0 else render(templates, "single_step", node=nodes[start - 1])
    messages = [{"role": "user", "content": f"{snapshot}\n\n{head}"}]
    for position in range(start, len(nodes)):
        node = nodes[position]
        reply = render(templates, "action_turn", node=node, params=params_text(node))
        if position > 0:
            reply = render(templates, "reflection", reflection=nodes[position - 1]) + "\n" + reply
        instruction = render(templates, "single_step", node=node)
        observation = render(templates, "observation_turn", node=node, instruction=instruction)
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": observation}]
    return messages


def messages_for(ctx: AgentContext, state: AgentState, with_pending_reflection: bool) -> list[Message]:
    """The messages of the reflect call, or (with the pending reflection) of the act call that continues it; a
    pending format-error exchange comes last."""
    nodes = state.get("operations", [])
    if with_pending_reflection:
        nodes = with_reflection(nodes, state.get("reflection"))
    build = single_call_turns if ctx.agent.get("single_call") else turns
    messages = [
        {"role": "system", "content": system_prompt(ctx, state["task"])},
        *build(ctx, nodes, state["snapshot"], state.get("snapshot_step", 0)),
    ]
    if retry := state.get("retry"):
        messages += [{"role": "assistant", "content": retry["response"]}, {"role": "user", "content": retry["message"]}]
    return messages


def prompt_chars(messages: list[Message]) -> int:
    return sum(len(message["content"]) for message in messages)
