"""The actions as the provider's tools (`model.action_format`, decided per model in llm_ide/models.py).

Each action's parameters are a JSON schema (the core's in the templates' `tools`, a variant's on its `Action`), its
`description` the tool's; the list is made the same way for every request of a run (same tools, same order, same
schemas: the prompt cache holds it). A reply is its text (the verdict, the reasoning) and its first tool call (the
action); in the conversation, an operation is the assistant's message with its call and the call's result, the
instruction after it as the user's text."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from llm_ide.calls import Message
from llm_ide.parsing import FormatError, Grammar, ParsedAction, parse_action, parse_params, parse_reflection
from llm_ide.parsing import parse_single_reply as parse_single_text
from llm_ide.prompting import render_string
from llm_ide.resources import AgentContext
from llm_ide.state.operations import OperationNode, Reflection
from llm_ide.tool_calls import call_dict, split


def tool(name: str, schema: Mapping[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """An action as a tool in OpenAI's format (langchain gives it to every provider in its own)."""
    parameters = {"type": "object", "properties": {}, **{k: v for k, v in schema.items() if k != "description"}}
    description = render_string(str(schema.get("description", "")), **values)
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def tool_list(ctx: AgentContext) -> list[dict[str, Any]]:
    """The core's actions, then each variant's, as tools."""
    ws = ctx.codebase
    values = {"view_max_lines": ws.view_max_lines, "search_max_results": ws.search_max_results}
    values |= {"command_timeout": ws.command_timeout}
    schemas = {**ctx.settings.templates.tools}
    schemas |= {name: action.schema for variant in ctx.variants for name, action in variant.actions.items()}
    return [tool(name, schema, values) for name, schema in schemas.items()]


def tools_for(ctx: AgentContext) -> list[dict[str, Any]] | None:
    """The run's tools (a fresh copy of the list made once), or None when its actions are in the text."""
    if not ctx.tools:
        return None
    if ("tools",) not in ctx.rendered:
        ctx.rendered["tools",] = json.dumps(tool_list(ctx))
    return json.loads(ctx.rendered["tools",])


def tool_action(reply: str, grammar: Grammar, offered: tuple[str, ...] = ()) -> ParsedAction:
    """The action of a reply's first tool call, its text the reasoning; `offered`: the tools the request gave (any
    action of the run's grammar is read: an absent variant's answers that it is absent)."""
    text, calls = split(reply)
    tools = ", ".join(offered or grammar.types)
    if not calls:
        raise FormatError(f"no tool call: end the reply with one call of a tool ({tools})")
    name = calls[0].name
    if name not in grammar.types:
        raise FormatError(f"unknown tool {name[:40]!r}; the tools are {tools}")
    try:
        params = parse_params(calls[0].arguments)
    except FormatError as error:
        raise FormatError(f"`{name}`: {error}") from None
    return ParsedAction(text.strip(), name, params)


def tool_single(reply: str, grammar: Grammar, offered: tuple[str, ...] = ()) -> tuple[Reflection, ParsedAction]:
    """The verdict opening the text, then the reasoning; the action from the call (a missing call is said first)."""
    action = partial(tool_action, offered=offered)
    action(reply, grammar)
    return parse_single_text(reply, grammar, action=action)


def tool_reflection(reply: str) -> Reflection:
    """A reflection (two calls per step): the reply's text; a tool call in it is not read."""
    return parse_reflection(split(reply)[0])


@dataclass(frozen=True)
class Reading:
    """How a run's replies are read: the verdict with the next action (one call per step), the action, the
    verdict alone (a reflection call); and the tools its requests carry (None: the actions are in the text)."""

    single: Callable[..., tuple[Reflection, ParsedAction]]
    action: Callable[..., ParsedAction]
    reflection: Callable[[str], Reflection]
    tools: list[dict[str, Any]] | None = None


TEXT = Reading(parse_single_text, parse_action, parse_reflection)


def reading(ctx: AgentContext) -> Reading:
    if not ctx.tools:
        return TEXT
    tools = tools_for(ctx)
    offered = tuple(spec["function"]["name"] for spec in tools or [])
    return Reading(partial(tool_single, offered=offered), partial(tool_action, offered=offered), tool_reflection, tools)


def call_id(node: OperationNode) -> str:
    return f"call_{node.id}"


def tool_reply(text: str, node: OperationNode) -> Message:
    """The reply that made an operation: its text and its call."""
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [call_dict(call_id(node), node.action_type, node.action_params)],
    }


def tool_outcome(node: OperationNode, result: str, instruction: str) -> list[Message]:
    """An operation's outcome: the call's result, then the instruction as the user's text."""
    return [
        {"role": "tool", "tool_call_id": call_id(node), "content": result},
        {"role": "user", "content": instruction},
    ]


def retry_turns(response: str, message: str, tools: bool) -> list[Message]:
    """A reply that could not be used and why: its calls (where the actions are tools) each answered with why."""
    text, calls = split(response) if tools else (response, [])
    if not calls:
        return [{"role": "assistant", "content": response}, {"role": "user", "content": message}]
    ids = [f"rejected_{position}" for position in range(len(calls))]
    made = [call_dict(ids[position], call.name, rejected_args(call.arguments)) for position, call in enumerate(calls)]
    return [
        {"role": "assistant", "content": text, "tool_calls": made},
        *({"role": "tool", "tool_call_id": ident, "content": message} for ident in ids),
    ]


def rejected_args(arguments: str) -> dict[str, Any]:
    """A rejected call's arguments as a message can hold them: an object, or the text that was not one."""
    try:
        value = json.loads(arguments)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"arguments": arguments}
