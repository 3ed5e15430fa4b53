"""What the tool calls' tests share (test_tool_calls, test_tool_calls_rejected): the cart's task, a run at its
bug, FIX_SCRIPT as replies that call tools and as a scripted model's items."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_script import FIX_SCRIPT, cart_run, tool_script
from openai_server import Reply

from llm_ide.run.trajectory import load_trajectory
from llm_ide.variant import Variant

TASK = "Cart.total ignores quantities."


def tool_replies(script: list[tuple[str, str, dict[str, Any]]] | None = None) -> list[str | int | Reply]:
    return [Reply(text, tool_calls=((name, args),)) for text, name, args in script or tool_script(FIX_SCRIPT)]


def run_at(tmp_path: Path, spec: str, url: str | None, variants: list[Variant] | None = None, **values: Any) -> Any:
    """A run at the cart's bug: its result and its trajectory."""
    result = cart_run(tmp_path, spec, url, variants, **values)
    return result, load_trajectory(result.trajectory_path)


def two_call_tool_script() -> list[Any]:
    """FIX_SCRIPT for the scripted model with the actions as tool calls, each reflection a text of its own."""
    items: list[Any] = []
    for text, name, args in tool_script(FIX_SCRIPT):
        verdict, _, thought = text.rpartition("\n")  # the thoughts are one line each
        items += [verdict] if verdict else []
        items.append({"text": thought, "tool_call": {"name": name, "arguments": args}})
    return items
