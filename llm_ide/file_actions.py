"""The core's actions on the repository's files: `view` (a file's lines, numbered), `view_symbol` (a class's or a
function's), `search` (grep, in a file, a folder or a glob), `edit` (one exact replacement) and `create` (a new file).
actions.py runs them, beside `bash` and `submit`."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from typing import Any

from llm_ide.codebase import ActionOutcome, Codebase, ParamError
from llm_ide.environments.base import OutsideRepository
from llm_ide.grep_rows import grep_hits, shown_path
from llm_ide.state.context import normalize_path


def named_path(ws: Codebase, params: dict[str, Any], key: str = "path") -> str:
    """The file an action's `key` parameter names, relative to the repository."""
    raw = params.get(key)
    if not isinstance(raw, str) or not raw.strip():
        raise ParamError(f"`{key}` must be a non-empty string")
    path = normalize_path(raw.strip(), ws.env.workdir)
    if not path:
        raise ParamError(f"`{key}` must name a file inside the repository, got {raw!r}")
    if path.startswith("../") or path == ".." or path.startswith("/"):
        raise OutsideRepository(raw.strip())
    return path


def file_text(ws: Codebase, path: str) -> str | None:
    """A file's text (None: there is no such file)."""
    snapshot = ws.env.read_files([path])[path]
    if snapshot is None and not ws.env.inside(path):
        raise OutsideRepository(path)
    return None if snapshot is None else snapshot.data.decode("utf-8", errors="surrogateescape")


def numbered(lines: list[str], start: int) -> str:
    return "\n".join(f"{number:>6}\t{text.rstrip(chr(13))}" for number, text in enumerate(lines, start))


def display(text: str) -> str:
    return text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


MAX_LINE = 2**31  # a line number past any file


def _int(params: dict[str, Any], key: str, default: int) -> int:
    value = params.get(key, default)
    if value is None:
        return default
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_LINE:
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d{1,10}\s*", value) and abs(int(value)) <= MAX_LINE:
        return int(value)
    shown = repr(value[:40]) + ("…" if len(value) > 40 else "") if isinstance(value, str) else type(value).__name__
    raise ParamError(f"`{key}` must be a line number, got {shown}")


def view(ws: Codebase, params: dict[str, Any]) -> ActionOutcome:
    path = named_path(ws, params)
    text = file_text(ws, path)
    if text is None:
        return ActionOutcome(ws.observe("view_missing", path=path), 1)
    lines = text.split("\n")
    if len(lines) > 1 and not lines[-1]:
        lines.pop()  # (the newline that ends the last line starts none)
    start = max(1, _int(params, "start_line", 1))
    end = _int(params, "end_line", start + ws.view_max_lines - 1)
    end = min(max(start, end), len(lines), start + ws.view_max_lines - 1)
    shown = lines[start - 1 : end]
    observation = ws.observe(
        "view", path=path, total=len(lines), start=start, end=end, numbered=display(numbered(shown, start))
    )
    return ActionOutcome(observation, 0, ws.view.scopes(path, range(start, end + 1)))


def view_symbol(ws: Codebase, params: dict[str, Any]) -> ActionOutcome:
    path = named_path(ws, params)
    symbol = params.get("symbol")
    symbol = symbol.strip() if isinstance(symbol, str) else ""
    if not symbol:
        raise ParamError("`symbol` must be a qualified name such as `Class.method`")
    text = file_text(ws, path)
    if text is None:
        return ActionOutcome(ws.observe("view_missing", path=path), 1)
    span = ws.view.definition_range(path, symbol)
    scope = ws.view.symbol_scope(path, symbol)
    if span is None or scope is None:
        names = sorted(set(re.findall(r"^\s*(?:async\s+def|def|class)\s+(\w+)", text, re.MULTILINE)))
        return ActionOutcome(
            ws.observe("view_symbol_missing", path=path, symbol=symbol, candidates=", ".join(names[:40])), 1
        )
    start, end = span
    lines = text.split("\n")[start - 1 : end]
    observation = ws.observe(
        "view_symbol", path=path, symbol=symbol, start=start, end=end, numbered=display(numbered(lines, start))
    )
    return ActionOutcome(observation, 0, [scope])


def search(ws: Codebase, params: dict[str, Any]) -> ActionOutcome:
    pattern = params.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise ParamError("`pattern` must be a non-empty regular expression")
    try:
        re.compile(pattern)
    except re.error as error:
        return ActionOutcome(ws.observe("search_bad_pattern", pattern=pattern, error=str(error)), 2)
    raw_path = str(params.get("path") or "").strip()
    target, include, selected = _search_scope(ws, params, raw_path)
    if target != "." and not ws.env.inside(target):  # grep follows a symlink named on its command line
        raise OutsideRepository(target)
    command = (
        f"grep -rnHIZE --exclude-dir=.git --exclude-dir=node_modules --exclude-dir=__pycache__ {include}"
        f"-e {shlex.quote(pattern)} -- {shlex.quote(target)} | head -n {ws.search_max_results * 20}"
    )
    result = ws.env.execute(command, timeout=ws.timeout())
    found = [(path, rest) for path, rest in grep_hits(result.output) if selected is None or selected.fullmatch(path)]
    hits = [f"{shown_path(path)}:{rest}" for path, rest in found]
    if not hits and f"{target}: No such file or directory" in result.output:
        return ActionOutcome(ws.observe("search_missing", path=target), 1)
    if not hits:
        return ActionOutcome(ws.observe("search_none", pattern=pattern, path=raw_path), 1)
    shown = [hit if len(hit) <= 240 else hit[:240] + " …" for hit in hits[: ws.search_max_results]]
    observation = ws.observe(
        "search", pattern=pattern, count=len(hits), shown=len(shown), results=display("\n".join(shown))
    )
    return ActionOutcome(observation, 0)


GLOB_CHARS = "*?["


def _search_scope(ws: Codebase, params: dict[str, Any], raw: str) -> tuple[str, str, re.Pattern[str] | None]:
    """What grep searches for `path`: (file or directory, `--include` option, full-path filter for globs).

    `""`/`"."`: the repository; a file or a directory: itself; `*.py`: every such file name anywhere;
    `sub/*.py`, `src/**/test_*.py`: the glob on the repo-relative path (`*` stays within one directory)."""
    if not raw or normalize_path(raw, ws.env.workdir) == "":
        return ".", "", None
    if not any(c in raw for c in GLOB_CHARS):
        return named_path(ws, params), "", None
    glob = normalize_path(raw, ws.env.workdir)
    if glob.startswith(("../", "/")) or glob == "..":
        raise OutsideRepository(raw)
    parts = glob.split("/")
    if len(parts) == 1:
        return ".", f"--include={shlex.quote(glob)} ", None
    fixed = next(i for i, part in enumerate(parts) if any(c in part for c in GLOB_CHARS))
    include = "" if parts[-1] == "**" else f"--include={shlex.quote(parts[-1])} "
    try:
        selected = re.compile(_glob_regex(parts))
    except re.error as error:  # e.g. the range of `[z-a]`
        raise ParamError(f"`path` is no valid glob ({error})") from None
    return "/".join(parts[:fixed]) or ".", include, selected


def _glob_regex(parts: list[str]) -> str:
    """A regex for a path glob: `*`, `?` and `[…]` within one directory, `**` across any number of them."""
    pieces = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            pieces.append(".*" if last else "(?:[^/]+/)*")
            continue
        regex, at = "", 0
        while at < len(part):
            char, at = part[at], at + 1
            close = part.find("]", at + 1) if char == "[" else -1
            if char == "*":
                regex += "[^/]*"
            elif char == "?":
                regex += "[^/]"
            elif close != -1:
                inner = part[at:close]
                regex += "[" + ("^" + inner[1:] if inner.startswith("!") else inner).replace("\\", "\\\\") + "]"
                at = close + 1
            else:
                regex += re.escape(char)
        pieces.append(regex if last else regex + "/")
    return "".join(pieces)


def edit(ws: Codebase, params: dict[str, Any]) -> ActionOutcome:
    path = named_path(ws, params)
    old, new = params.get("old"), params.get("new")
    if not isinstance(old, str) or not old:
        raise ParamError("`old` must be the exact, non-empty text to replace")
    if not isinstance(new, str):
        raise ParamError("`new` must be a string (may be empty)")
    text = file_text(ws, path)
    if text is None:
        return ActionOutcome(ws.observe("view_missing", path=path), 1)
    count = text.count(old)
    if count == 0:
        return ActionOutcome(ws.observe("edit_no_match", path=path), 1)
    if count > 1:
        starts = [m.start() for m in re.finditer(re.escape(old), text)]
        lines = ", ".join(str(text.count("\n", 0, s) + 1) for s in starts[:20])
        return ActionOutcome(ws.observe("edit_many_matches", path=path, count=count, lines=lines), 1)
    at = text.index(old)
    updated = text[:at] + new + text[at + len(old) :]
    ws.env.write_file(path, updated.encode("utf-8", errors="surrogateescape"))
    first = text.count("\n", 0, at) + 1
    last = updated.count("\n", 0, at + len(new) - 1) + 1 if new else first  # the line of `new`'s last character
    rows = updated.removesuffix("\n").split("\n")  # (a final newline ends the last line: no empty line after it)
    start, end = max(1, first - 3), min(len(rows), last + 3)
    observation = ws.observe(
        "edit", path=path, start=start, end=end, numbered=display(numbered(rows[start - 1 : end], start))
    )
    return ActionOutcome(observation, 0, ws.view.scopes(path, range(first, last + 1)))


def create(ws: Codebase, params: dict[str, Any]) -> ActionOutcome:
    path = named_path(ws, params)
    content = params.get("content")
    if not isinstance(content, str):
        raise ParamError("`content` must be the file's text")
    if file_text(ws, path) is not None:
        return ActionOutcome(ws.observe("create_exists", path=path), 1)
    ws.env.write_file(path, content.encode("utf-8"))
    total = content.count("\n") + (0 if content.endswith("\n") else 1)
    scopes = [replace(scope, created=True) for scope in ws.view.scopes(path, range(1, total + 1))]
    return ActionOutcome(ws.observe("create", path=path, total=total), 0, scopes)
