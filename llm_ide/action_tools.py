"""The actions as the provider's tools (`model.action_format`, the run's exchange: llm_ide/exchange.py).

Each action's parameters are a JSON schema (the core's in the templates' `tools`, a variant's on its `Action`), its
`description` the tool's; the list is made the same way for every request of a run (same tools, same order, same
schemas: the prompt cache holds it). A reply is its text (the verdict, the reasoning) and its tool calls, as the
provider gave them: the first is the action, its arguments checked against the tool's schema; in the conversation,
an operation is the assistant's message with its call and the call's result, the instruction after it as the
user's text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from llm_ide.calls import Message, ModelReply, ToolCall, ToolCallDict
from llm_ide.errors import FormatError
from llm_ide.parsing import Grammar, ParsedAction, parse_params, storable
from llm_ide.prompting import render_string
from llm_ide.state.operations import OperationNode

REJECTED_CHARS = 4000  # of a rejected call's arguments sent back with why
JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def tool(name: str, schema: Mapping[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """An action as a tool in OpenAI's format (langchain gives it to every provider in its own)."""
    parameters = {"type": "object", "properties": {}, **{k: v for k, v in schema.items() if k != "description"}}
    description = render_string(str(schema.get("description", "")), **values)
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def schema_problem(params: dict[str, Any], schema: Mapping[str, Any]) -> str | None:
    """What the arguments lack or hold against the tool's schema: a required parameter missing, a parameter of
    another type than its schema's (a boolean is no number)."""
    missing = [key for key in schema.get("required") or [] if key not in params]
    if missing:
        return f"missing {', '.join(f'`{key}`' for key in missing)}"
    for key, value in params.items():
        wanted = (schema.get("properties") or {}).get(key, {}).get("type")
        types = JSON_TYPES.get(wanted) if isinstance(wanted, str) else None
        if types is not None and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
            return f"`{key}` must be {'an' if wanted == 'integer' else 'a'} {wanted}, got {type(value).__name__}"
    return None


def tool_action(reply: ModelReply, grammar: Grammar, tools: list[dict[str, Any]] | None) -> ParsedAction:
    """The action of a reply's first tool call, its text the reasoning; any action of the run's grammar is read (an
    absent variant's answers that it is absent), a tool the request gave has its arguments checked."""
    given = {spec["function"]["name"]: spec["function"]["parameters"] for spec in tools or []}
    names = ", ".join(given or grammar.offered)
    if not reply.tool_calls:
        raise FormatError(f"no tool call: end the reply with one call of a tool ({names})")
    call = reply.tool_calls[0]
    if call.name not in grammar.types:
        raise FormatError(f"unknown tool {call.name[:40]!r}; the tools are {names}")
    try:
        params = parse_params(call.arguments)
    except FormatError as error:
        raise FormatError(f"`{call.name}`: {error}") from None
    if call.name in given and (problem := schema_problem(params, given[call.name])):
        raise FormatError(f"`{call.name}`: {problem}")
    return ParsedAction(reply.text.strip(), call.name, params)


def call_id(node: OperationNode) -> str:
    return f"call_{node.id}"


def tool_reply(text: str, node: OperationNode) -> Message:
    """The reply that made an operation: its text and its call."""
    call = ToolCallDict(id=call_id(node), name=node.action_type, args=node.action_params)
    return {"role": "assistant", "content": text, "tool_calls": [call]}


def tool_outcome(node: OperationNode, result: str, instruction: str) -> list[Message]:
    """An operation's outcome: the call's result, then the instruction as the user's text."""
    return [
        {"role": "tool", "tool_call_id": call_id(node), "content": result},
        {"role": "user", "content": instruction},
    ]


def rejected_turns(text: str, calls: list[ToolCall], message: str) -> list[Message]:
    """A reply that could not be used, with its calls, each answered with why (providers want every call answered)."""
    ids = [f"rejected_{position}" for position in range(len(calls))]
    made = [
        ToolCallDict(id=ident, name=call.name, args=rejected_args(call.arguments))
        for ident, call in zip(ids, calls, strict=True)
    ]
    answers: list[Message] = [{"role": "tool", "tool_call_id": ident, "content": message} for ident in ids]
    return [{"role": "assistant", "content": text, "tool_calls": made}, *answers]


def rejected_args(arguments: str) -> dict[str, Any]:
    """A rejected call's arguments as a message can hold them: an object any store and provider takes, or the text
    that was not one (its head, when it is long)."""
    try:
        value = storable(json.loads(arguments)) if len(arguments) <= REJECTED_CHARS else None
    except (ValueError, RecursionError):  # FormatError is a ValueError
        value = None
    if isinstance(value, dict):
        return value
    return {"arguments": arguments if len(arguments) <= REJECTED_CHARS else arguments[:REJECTED_CHARS] + "…"}
