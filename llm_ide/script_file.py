"""The scripted model's file (`--model scripted:FILE.yaml`) read and checked: a YAML list of items (or a mapping with
a `responses:` list), each a reply (a text, or a tool call with the text before it) or a choice between two by the
prompt; a fault is one line naming the file, and the item by its number. Once read, a script written for two calls per
step is joined for a run of one (`joined_script`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from llm_ide.errors import ModelError
from llm_ide.settings import load_yaml
from llm_ide.verdict import alone

ScriptItem = str | dict[str, Any]
CHOICE_KEYS = {"if_prompt_contains", "then", "else"}
CHOICES = "if_prompt_contains, then, else"


def reply_problem(item: object) -> str | None:
    """What keeps an item from being a reply: a text, or a tool call (its name, its arguments as a mapping or a JSON
    text) with the text before it; None: nothing."""
    if isinstance(item, str):
        return None
    if not isinstance(item, dict):
        return f"{json.dumps(item, default=str)[:60]} is neither a text nor a mapping"
    call = item.get("tool_call")
    if unknown := sorted(map(str, set(item) - {"text", "tool_call"})):
        return f"unknown key {unknown[0]!r} (a reply is a text, or {{text, tool_call}}; a choice {{{CHOICES}}})"
    if not isinstance(item.get("text", ""), str):
        return "its text is not a string"
    if not isinstance(call, dict):
        return "its tool_call is missing or not a mapping {name, arguments}"
    if unknown := sorted(map(str, set(call) - {"name", "arguments"})):
        return f"its tool_call has an unknown key {unknown[0]!r} (it has name and arguments)"
    if not isinstance(call.get("name"), str):
        return "its tool_call has no name (a string)"
    if not isinstance(call.get("arguments", {}), dict | str):
        return "its tool_call's arguments are neither a mapping nor a JSON text"
    return None


def item_problem(item: object) -> str | None:
    """What is wrong with an item of a script (a reply, or a choice of two by the prompt); None: nothing."""
    if not (isinstance(item, dict) and "if_prompt_contains" in item):
        return reply_problem(item)
    if set(item) != CHOICE_KEYS:
        return f"a choice has the keys {CHOICES}, and only those (it has {', '.join(map(str, item))})"
    if not isinstance(item["if_prompt_contains"], str):
        return "its if_prompt_contains is not a string"
    problems = [f"its {key}: {problem}" for key in ("then", "else") if (problem := reply_problem(item[key]))]
    return problems[0] if problems else None


def load_script(path: Path) -> list[ScriptItem]:
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), yaml.SafeLoader)
    except FileNotFoundError:
        raise ModelError(f"scripted model: file not found: {path}") from None
    except IsADirectoryError:
        raise ModelError(f"scripted model: {path} is a directory: give a YAML file of replies") from None
    except PermissionError:
        raise ModelError(f"scripted model: {path} cannot be read (permission denied)") from None
    except UnicodeDecodeError as error:
        raise ModelError(f"scripted model: {path} is not UTF-8 text (byte {error.start}: {error.reason})") from None
    except yaml.YAMLError as error:
        raise ModelError(f"scripted model: {path} is not valid YAML: {' '.join(str(error).split())}") from None
    responses = data.get("responses") if isinstance(data, dict) else data
    if not responses and (data is None or isinstance(responses, list)):
        said = "is empty" if data is None else "has no replies"
        raise ModelError(f"scripted model: {path} {said}: give it a list of replies, one per model call")
    if not isinstance(responses, list):
        raise ModelError(
            f"scripted model: {path} must hold a list of strings, {{text, tool_call: {{name, arguments}}}} tool calls "
            "or {if_prompt_contains, then, else} choices (or a mapping with a `responses:` list)"
        )
    for number, item in enumerate(responses, 1):
        if problem := item_problem(item):
            raise ModelError(f"scripted model: {path}: item {number} of {len(responses)}: {problem}")
    return responses


def joined_script(items: list[ScriptItem]) -> list[ScriptItem]:
    """A script for a run of one call per step: an item that is only a verdict joins the item after it (so a script
    written for two calls per step plays in one)."""
    out: list[ScriptItem] = []
    waiting: str | None = None
    for item in items:
        if waiting is None and isinstance(item, str) and alone(item):
            waiting = item
        elif waiting is None:
            out.append(item)
        else:
            out.append(prefixed(waiting, item))
            waiting = None
    return out if waiting is None else [*out, waiting]


def prefixed(text: str, item: ScriptItem) -> ScriptItem:
    """An item whose reply (each of a choice's) opens with `text`; a tool call's text does."""
    if isinstance(item, str):
        return f"{text}\n{item}"
    if "tool_call" in item:
        return {**item, "text": f"{text}\n{item.get('text', '')}".rstrip("\n")}
    return {**item, "then": prefixed(text, item["then"]), "else": prefixed(text, item["else"])}


def calls_a_tool(item: Any) -> bool:
    """Whether an item answers with a tool call (either reply of a choice)."""
    choices = (item.get("then"), item.get("else")) if isinstance(item, dict) else ()
    return isinstance(item, dict) and "tool_call" in item or any(map(calls_a_tool, choices))
