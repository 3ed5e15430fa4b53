"""Which driver actions need the navigator's approval, and which commands are read-only."""

from __future__ import annotations

import difflib
from typing import Any

from llm_ide import actions
from llm_ide.codebase import Codebase, ParamError
from llm_ide.environments.base import OutsideRepository
from llm_ide.file_actions import file_text, named_path
from llm_ide.navigator.settings import NavigatorSettings

READ_ONLY_ACTIONS = frozenset({"view", "view_symbol", "search"})


def read_only(command: str, settings: NavigatorSettings) -> bool:
    """Every part of the command is a listed reader (sed without -i, git with a read-only subcommand); no redirection
    into a file."""
    return actions.read_only(command, settings.read_only_commands, settings.read_only_git)


def is_test(command: str, settings: NavigatorSettings) -> bool:
    stripped = command.strip()
    return any(stripped == prefix or stripped.startswith(prefix + " ") for prefix in settings.test_commands)


def gated(action_type: str, params: dict[str, Any], settings: NavigatorSettings) -> bool:
    if action_type not in settings.gate:
        return False
    return action_type != "bash" or not read_only(str(params.get("command") or ""), settings)


def explorable(action_type: str, params: dict[str, Any], settings: NavigatorSettings, tests: bool) -> bool:
    """What the navigator may run itself: view, view_symbol, search, read-only bash (and the tests when allowed)."""
    if action_type in READ_ONLY_ACTIONS:
        return True
    command = str(params.get("command") or "")
    return action_type == "bash" and (read_only(command, settings) or (tests and is_test(command, settings)))


def diff_preview(ws: Codebase, action_type: str, params: dict[str, Any], limit: int) -> str:
    """The unified diff an edit or a create would make (nothing is written); empty for other actions."""
    if action_type not in {"edit", "create"}:
        return ""
    try:
        path = named_path(ws, params)
        before = file_text(ws, path)
    except (ParamError, OutsideRepository) as error:
        return f"(no preview: {error})"
    if action_type == "create":
        after = str(params.get("content") or "")
        old_name = "/dev/null" if before is None else f"a/{path}"
        before = before or ""
    else:
        old, new = params.get("old"), params.get("new")
        if before is None or not isinstance(old, str) or not old or before.count(old) != 1 or not isinstance(new, str):
            return "(no preview: `old` does not occur exactly once)"
        after, old_name = before.replace(old, new, 1), f"a/{path}"
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), old_name, f"b/{path}", n=3
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters]\n"
