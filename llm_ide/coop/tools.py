"""The planners' read-only tools on a checkout: list_files, read_file, grep_search (paths never leave the repo)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llm_ide.coop.settings import CoopSettings
from llm_ide.patterns import BoundedPattern, PatternError
from llm_ide.prompting import render_string
from llm_ide.terminal import plural

READ_ONLY = ("list_files", "read_file", "grep_search")


class ToolError(ValueError):
    """Bad parameters: the message becomes the observation."""


def inside(repo: Path, path: str, settings: CoopSettings) -> Path:
    target = (repo / (path or ".")).resolve()
    if target != repo.resolve() and repo.resolve() not in target.parents:
        raise ToolError(render_string(settings.templates.tool_messages.outside, path=path))
    if not target.exists():
        raise ToolError(render_string(settings.templates.tool_messages.not_found, path=path))
    return target


def list_files(repo: Path, params: dict[str, Any], settings: CoopSettings) -> str:
    target = inside(repo, str(params.get("path") or "."), settings)
    if target.is_file():
        return target.relative_to(repo.resolve()).as_posix()
    entries = sorted(p for p in target.iterdir() if p.name != ".git")
    return "\n".join(p.relative_to(repo.resolve()).as_posix() + ("/" if p.is_dir() else "") for p in entries)


def read_file(repo: Path, params: dict[str, Any], settings: CoopSettings) -> str:
    target = inside(repo, str(params.get("path") or ""), settings)
    if not target.is_file():
        raise ToolError(render_string(settings.templates.tool_messages.not_found, path=params.get("path")))
    lines = target.read_text(encoding="utf-8", errors="replace").splitlines()
    start = max(1, int(params.get("start_line") or 1))
    end = min(len(lines), int(params.get("end_line") or start + settings.planning.read_max_lines - 1))
    end = min(end, start + settings.planning.read_max_lines - 1)
    shown = [f"{n:>6}\t{lines[n - 1]}" for n in range(start, end + 1)]
    return f"{params['path']} ({plural(len(lines), 'line')}), lines {start}-{end}:\n" + "\n".join(shown)


def search(pattern: BoundedPattern, line: str) -> bool:
    try:
        return pattern.search(line) is not None
    except PatternError as error:
        raise ToolError(str(error)) from None


def grep_search(repo: Path, params: dict[str, Any], settings: CoopSettings) -> str:
    pattern = str(params.get("pattern") or "")
    try:
        regex = BoundedPattern(pattern, what="bad pattern")  # the model's: a catastrophic one costs 2 s, then one line
    except PatternError as error:
        raise ToolError(str(error)) from None
    target = inside(repo, str(params.get("path") or "."), settings)
    files = (
        [target] if target.is_file() else sorted(p for p in target.rglob("*") if p.is_file() and ".git" not in p.parts)
    )
    hits: list[str] = []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if search(regex, line):
                hits.append(f"{file.relative_to(repo.resolve()).as_posix()}:{number}: {line.strip()}")
                if len(hits) >= settings.planning.grep_max_results:
                    return "\n".join(hits)
    if not hits:
        return render_string(
            settings.templates.tool_messages.no_matches, pattern=pattern, path=params.get("path") or "."
        )
    return "\n".join(hits)


def run_tool(repo: Path, action: str, params: dict[str, Any], settings: CoopSettings) -> str:
    tool = {"list_files": list_files, "read_file": read_file, "grep_search": grep_search}[action]
    try:
        return tool(repo, params, settings)
    except (ToolError, ValueError, TypeError, KeyError) as error:
        return (
            str(error)
            if isinstance(error, ToolError)
            else render_string(settings.templates.tool_messages.bad_params, action=action, error=error)
        )
