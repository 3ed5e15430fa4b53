"""The core's actions, run by name (`execute_action`): `bash` (a command in the environment, with the code its output
showed and the locations a configured tool named), `submit`, and the actions on files (file_actions.py); a bad
parameter, a path outside the repository or one no file can have is told to the model, and the run goes on. Whether a
command only reads (`read_only`) is told from its words, without running it."""

from __future__ import annotations

import errno
import os
import re
import shlex
import time
from collections.abc import Collection
from contextlib import nullcontext
from typing import Any

from llm_ide.codebase import ActionOutcome, Codebase, ParamError
from llm_ide.codeview.observed import observed_scopes
from llm_ide.environments.base import OutsideRepository
from llm_ide.environments.live import watched
from llm_ide.environments.snapshots import UNNAMEABLE
from llm_ide.file_actions import create, edit, search, view, view_symbol
from llm_ide.parsing import Grammar
from llm_ide.prompting import truncate
from llm_ide.secrets import redact
from llm_ide.sed import only_prints as prints
from llm_ide.state.context import Scope, normalize_path

LOCATION_PATTERNS = (
    re.compile(r"(?P<path>[\w./-]+\.py)\((?P<line>\d+)\)"),
    re.compile(r"File \"(?P<path>[^\"]+)\", line (?P<line>\d+)"),
    re.compile(r"(?P<path>[\w./-]+\.\w+):(?P<line>\d+)"),
)
MAX_LOCATIONS = 40


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


WRITES = (">", ">>", "tee", "-i", "--in-place")
READERS = ("cat", "ls", "grep", "head", "tail", "wc", "find", "nl", "sed", "git")
GIT_READERS = ("diff", "log", "show", "status", "grep", "blame")
WRITING = {"git": ("--output", "-O", "--open-files", "--ext"), "find": ("-delete", "-exec", "-ok", "-fprint", "-fls")}


def read_only(command: str, readers: Collection[str] = READERS, git_readers: Collection[str] = GIT_READERS) -> bool:
    """Every part of the command (lines too) is one of `readers` (sed that only prints, git with one of `git_readers`;
    no option that writes or runs a program); no redirection into a file, no substitution."""
    command = command.replace("2>&1", " ").replace(">&2", " ").replace("\n", ";")
    if any(mark in command for mark in (">", "$(", "`", "<(")) or not (segments := _segments(command)):
        return False
    for words in segments:
        tool = words[0].rsplit("/", 1)[-1]
        if tool not in readers or any(word in WRITES or word.startswith(WRITING.get(tool, ())) for word in words[1:]):
            return False
        if (tool == "git" and (len(words) < 2 or words[1] not in git_readers)) or (tool == "sed" and not prints(words)):
            return False
    return True


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
