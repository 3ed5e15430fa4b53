from __future__ import annotations

import errno
import os
import re
import shlex
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from llm_ide.codeview import CodeView
from llm_ide.codeview.observed import observed_scopes
from llm_ide.environments.base import UNNAMEABLE, Environment, OutsideRepository
from llm_ide.environments.live import CommandListener, watched
from llm_ide.grep_rows import grep_hits, shown_path
from llm_ide.parsing import Grammar
from llm_ide.prompting import render, truncate
from llm_ide.secrets import redact
from llm_ide.settings import CoreSettings, Templates
from llm_ide.state.context import Scope, normalize_path

LOCATION_PATTERNS = (
    re.compile(r"(?P<path>[\w./-]+\.py)\((?P<line>\d+)\)"),
    re.compile(r"File \"(?P<path>[^\"]+)\", line (?P<line>\d+)"),
    re.compile(r"(?P<path>[\w./-]+\.\w+):(?P<line>\d+)"),
)
MAX_LOCATIONS = 40
MIN_TIMEOUT = 0.1  # seconds a command gets when the wall-time limit is (all but) reached


class ParamError(ValueError):
    pass


@dataclass
class ActionOutcome:
    observation: str
    returncode: int
    accessed: list[Scope] = field(default_factory=list)
    duration: float = 0.0
    submitted: bool = False
    timed_out: bool = False


@dataclass
class Codebase:
    """The repository as the actions reach it: the environment it lives in, the code view over it, and the
    templates and limits the actions need."""

    env: Environment
    view: CodeView
    templates: Templates
    view_max_lines: int = 200
    search_max_results: int = 100
    command_timeout: float = 120.0
    observation_max_chars: int = 0  # what of an output the agent is shown (0: all of it)
    tool_commands: tuple[str, ...] = ()
    deadline: float | None = None  # time.monotonic() at which the run's wall-time limit passes
    on_command: CommandListener | None = None  # told of each command of the agent's as it runs (its output so far)

    def timeout(self) -> float:
        """A command's timeout: the configured one, or the time left before the wall-time limit when that is sooner."""
        if self.deadline is None:
            return self.command_timeout
        return max(MIN_TIMEOUT, min(self.command_timeout, self.deadline - time.monotonic()))

    @classmethod
    def for_settings(cls, env: Environment, settings: CoreSettings, **extra: Any) -> Codebase:
        """The repository in `env` with the templates and limits of `settings`."""
        return cls(
            env=env,
            view=CodeView(env),
            templates=settings.templates,
            view_max_lines=settings.agent.view_max_lines,
            search_max_results=settings.agent.search_max_results,
            command_timeout=settings.environment.command_timeout,
            observation_max_chars=settings.agent.observation_max_chars,
            **extra,
        )

    def observe(self, name: str, **values: Any) -> str:
        return render(self.templates, f"observations.{name}", **values)

    def path(self, params: dict[str, Any], key: str = "path") -> str:
        raw = params.get(key)
        if not isinstance(raw, str) or not raw.strip():
            raise ParamError(f"`{key}` must be a non-empty string")
        path = normalize_path(raw.strip(), self.env.workdir)
        if not path:
            raise ParamError(f"`{key}` must name a file inside the repository, got {raw!r}")
        if path.startswith("../") or path == ".." or path.startswith("/"):
            raise OutsideRepository(raw.strip())
        return path

    def read_text(self, path: str) -> str | None:
        snapshot = self.env.read_files([path])[path]
        if snapshot is None and not self.env.inside(path):
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
    path = ws.path(params)
    text = ws.read_text(path)
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
    path = ws.path(params)
    symbol = params.get("symbol")
    symbol = symbol.strip() if isinstance(symbol, str) else ""
    if not symbol:
        raise ParamError("`symbol` must be a qualified name such as `Class.method`")
    text = ws.read_text(path)
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
        return ws.path(params), "", None
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
    path = ws.path(params)
    old, new = params.get("old"), params.get("new")
    if not isinstance(old, str) or not old:
        raise ParamError("`old` must be the exact, non-empty text to replace")
    if not isinstance(new, str):
        raise ParamError("`new` must be a string (may be empty)")
    text = ws.read_text(path)
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
    last = first + new.count("\n")
    rows = updated.split("\n")
    start, end = max(1, first - 3), min(len(rows), last + 3)
    observation = ws.observe(
        "edit", path=path, start=start, end=end, numbered=display(numbered(rows[start - 1 : end], start))
    )
    return ActionOutcome(observation, 0, ws.view.scopes(path, range(first, last + 1)))


def create(ws: Codebase, params: dict[str, Any]) -> ActionOutcome:
    path = ws.path(params)
    content = params.get("content")
    if not isinstance(content, str):
        raise ParamError("`content` must be the file's text")
    if ws.read_text(path) is not None:
        return ActionOutcome(ws.observe("create_exists", path=path), 1)
    ws.env.write_file(path, content.encode("utf-8"))
    total = content.count("\n") + (0 if content.endswith("\n") else 1)
    scopes = [replace(scope, created=True) for scope in ws.view.scopes(path, range(1, total + 1))]
    return ActionOutcome(ws.observe("create", path=path, total=total), 0, scopes)


def bash(ws: Codebase, params: dict[str, Any]) -> ActionOutcome:
    command = params.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ParamError("`command` must be a non-empty shell command")
    with watched(ws.on_command, command) if ws.on_command else nullcontext() as watch:  # no listener: no watch
        result = ws.env.execute(command, timeout=ws.timeout(), on_output=watch)
        if watch is not None:
            watch.returncode = result.returncode
    observation = ws.observe("bash", output=result.output)
    limit = ws.observation_max_chars
    shown = truncate(observation, limit, ws.templates) if limit else observation  # as execute_tool will cap it
    accessed = observed_scopes(ws.view, command, shown) + _scopes(ws, tool_locations(command, result.output, ws))
    return ActionOutcome(observation, result.returncode, accessed, timed_out=result.timed_out)


def submit(ws: Codebase, params: dict[str, Any]) -> ActionOutcome:
    return ActionOutcome(ws.observe("submit"), 0, submitted=True)


PATH_ERRORS = UNNAMEABLE | {errno.EEXIST, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM, errno.EROFS}
ACTIONS = {f.__name__: f for f in (view, view_symbol, search, edit, create, bash, submit)}
CORE_GRAMMAR = Grammar.of(tuple(ACTIONS), frozenset({"submit"}))


def execute_action(ws: Codebase, action_type: str, params: dict[str, Any]) -> ActionOutcome:
    """One of the core's actions; an action the run does not know (one of a variant a resumed run no longer has) is
    told so."""
    started = time.perf_counter()
    run = ACTIONS.get(action_type)
    try:
        if run is not None:
            outcome = run(ws, params)
        else:
            outcome = ActionOutcome(ws.observe("unknown_action", action_type=action_type), 2)
    except ParamError as error:
        outcome = ActionOutcome(ws.observe("bad_params", action_type=action_type, error=str(error)), 2)
    except OutsideRepository as error:
        outcome = ActionOutcome(ws.observe("outside_repository", path=error.path), 2)
    except OSError as error:  # a path no file can have or be written at: the model is told, the run goes on
        if error.errno not in PATH_ERRORS:
            raise
        outcome = ActionOutcome(ws.observe("bad_params", action_type=action_type, error=os.strerror(error.errno)), 2)
    outcome.observation = redact(outcome.observation)
    outcome.duration = time.perf_counter() - started
    return outcome


def _segments(command: str) -> list[list[str]]:
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return []
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token and set(token) <= set(";&|"):
            segments.append([])
        else:
            segments[-1].append(token)
    return [segment for segment in segments if segment]


def tool_locations(command: str, output: str, ws: Codebase) -> list[tuple[str, int]]:
    """`file:line` locations named in the output of a configured tool (e.g. a debugger's `where`)."""
    names = {words[0].rsplit("/", 1)[-1] for words in _segments(command)}
    if not names & set(ws.tool_commands):
        return []
    seen: dict[tuple[str, int], None] = {}
    for pattern in LOCATION_PATTERNS:
        for match in pattern.finditer(output):
            seen.setdefault((match["path"], int(match["line"])), None)
            if len(seen) >= MAX_LOCATIONS:
                break
    return list(seen)


def _scopes(ws: Codebase, locations: list[tuple[str, int]]) -> list[Scope]:
    paths = {raw: normalize_path(raw, ws.env.workdir) for raw, _ in locations}
    paths = {raw: path for raw, path in paths.items() if path and not path.startswith(("../", "/"))}
    ws.view.refresh(set(paths.values()))
    return [scope for raw, line in locations if raw in paths for scope in ws.view.scopes(paths[raw], [line], False)]
