"""`navigator definition|references PATH (LINE COL|LINE NAME|NAME)` and `navigator symbols QUERY`.

Every location is printed as `path:line: code` (path relative to the project root when inside it), one per line.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import jedi
from jedi.api.classes import Name

DEFAULT_LIMIT = 50
DESCRIPTION = """Code navigation with jedi. Locations print as `path:line: code`.

  navigator definition PATH LINE COL     the definition of the name at LINE, COL (both 1-based)
  navigator definition PATH LINE NAME    ... of NAME on line LINE (e.g. `12 compute` or `12 self.total`)
  navigator definition PATH NAME         ... of NAME as seen from PATH (e.g. `Parser.parse`, `os.path.join`)
  navigator references PATH (LINE COL | LINE NAME | NAME)   every use of that name in the project
  navigator symbols QUERY                workspace symbols: `name`, `Class.method`, `class Name`, `def name`
"""


class NavigatorError(Exception):
    pass


def own_interpreter(path: str) -> bool:
    return os.path.abspath(path).startswith(os.path.abspath(sys.prefix) + os.sep)


def project_for(root: Path, python: str | None) -> jedi.Project:
    """The project with its interpreter (for its installed packages): --python, $NAVIGATOR_PYTHON, else the first
    python3 on PATH that is not the navigator's own; jedi's default when none fits. The project holds the one
    environment (an interpreter jedi starts): the scripts and the project's search share it."""
    explicit = python or os.environ.get("NAVIGATOR_PYTHON")
    candidates = [explicit] if explicit else [shutil.which(name) for name in ("python3", "python")]
    for candidate in candidates:
        if candidate and (explicit or not own_interpreter(candidate)):
            project = jedi.Project(root, environment_path=candidate)
            try:
                project.get_environment()
                return project
            except jedi.InvalidPythonEnvironment as error:
                if explicit:
                    print(f"navigator: cannot use {candidate} ({error}); using its own interpreter", file=sys.stderr)
    return jedi.Project(root)


def source(script: jedi.Script) -> str:
    return Path(script.path).read_text(encoding="utf-8", errors="replace")


class Navigator:
    def __init__(self, root: Path, python: str | None, limit: int) -> None:
        self.root = root.resolve()
        self.project = project_for(self.root, python)
        self.environment = self.project.get_environment()
        self.limit = limit

    def script(self, path: str | Path) -> jedi.Script:
        file = Path(path) if Path(path).is_absolute() else self.root / path
        if not file.is_file():
            raise NavigatorError(f"no such file: {path}")
        return jedi.Script(path=file, project=self.project, environment=self.environment)

    def display(self, name: Name) -> str:
        if name.module_path is None:
            return f"<{name.module_name}>: {name.description}"
        path = Path(name.module_path)
        shown = path.relative_to(self.root) if path.is_relative_to(self.root) else path
        text = f"(module {name.full_name or name.name})" if name.type == "module" else name.get_line_code().strip()
        return f"{shown}:{name.line or 1}: {text}"

    def at(self, script: jedi.Script, line: int, where: str) -> tuple[int, int]:
        """(line, 0-based column) for `LINE COL` (1-based) or `LINE NAME`."""
        lines = source(script).splitlines()
        if not 1 <= line <= len(lines):
            raise NavigatorError(f"line {line} is outside the file (1-{len(lines)})")
        text = lines[line - 1]
        if where.isdigit():
            column = int(where) - 1
            if not 0 <= column <= len(text.rstrip("\r\n")):
                raise NavigatorError(f"column {where} is outside line {line} ({len(text.rstrip())} characters)")
            return line, column
        match = re.search(r"(?<!\w)" + re.escape(where) + r"(?!\w)", text)
        if match is None:
            raise NavigatorError(f"`{where}` does not occur on line {line}: {text.strip()}")
        return line, match.end() - len(where.split(".")[-1])

    def definitions_at(self, script: jedi.Script, line: int, column: int) -> list[Name]:
        return script.goto(line, column, follow_imports=True) or script.infer(line, column)

    def definitions_of(self, script: jedi.Script, name: str) -> list[Name]:
        found = [target for hit in script.search(name, all_scopes=True) for target in self._follow(hit)]
        if not found and "." in name:
            head, _, tail = name.rpartition(".")
            found = self._attribute(script, head, tail)
        return found or list(self.project.search(name, all_scopes=True))

    def _follow(self, name: Name) -> list[Name]:
        return name.goto(follow_imports=True) or [name]

    def _attribute(self, script: jedi.Script, head: str, tail: str) -> list[Name]:
        """`os.path.join` from a file that imports os: complete `head.` and pick `tail`."""
        code = source(script) + f"\n{head}.{tail}\n"
        probe = jedi.Script(code, path=script.path, project=self.project, environment=self.environment)
        return probe.goto(len(code.splitlines()), len(head) + 1, follow_imports=True)

    def references(self, definitions: list[Name]) -> list[Name]:
        for definition in definitions:
            if definition.module_path is not None and definition.line is not None:
                script = self.script(definition.module_path)
                return script.get_references(definition.line, definition.column, include_builtins=False)
        return []

    def symbols(self, query: str) -> list[Name]:
        return list(self.project.search(query, all_scopes=True))

    def render(self, names: Iterable[Name], sort: bool = False) -> list[str]:
        lines = list(dict.fromkeys(self.display(name) for name in names))
        if sort:
            lines.sort(key=_location_key)
        if len(lines) > self.limit:
            lines = lines[: self.limit] + [f"[... {len(lines) - self.limit} more: --limit N shows more]"]
        return lines


def _location_key(line: str) -> tuple[str, int]:
    path, _, rest = line.partition(":")
    number = rest.partition(":")[0]
    return path, int(number) if number.isdigit() else 0


def locate(navigator: Navigator, args: argparse.Namespace) -> list[Name]:
    script = navigator.script(args.path)
    if not args.location:
        raise NavigatorError("give LINE COL, LINE NAME, or NAME after PATH")
    first = args.location[0]
    if first.isdigit():
        if len(args.location) != 2:
            raise NavigatorError("after LINE give a COL (1-based) or the NAME on that line")
        line, column = navigator.at(script, int(first), args.location[1])
        return navigator.definitions_at(script, line, column)
    if len(args.location) != 1:
        raise NavigatorError("give LINE COL, LINE NAME, or a single NAME after PATH")
    return navigator.definitions_of(script, first)


def parser() -> argparse.ArgumentParser:
    main_parser = argparse.ArgumentParser(
        prog="navigator", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    main_parser.add_argument("--root", default=None, help="project root (default: the current directory)")
    main_parser.add_argument("--python", default=None, help="the project's interpreter (default: python3 on PATH)")
    main_parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="most results printed (default 50)")
    commands = main_parser.add_subparsers(dest="command", required=True)
    for command in ("definition", "references"):
        sub = commands.add_parser(command, help=f"the {command} of a name")
        sub.add_argument("path")
        sub.add_argument("location", nargs="*", metavar="LINE COL | LINE NAME | NAME")
    symbols = commands.add_parser("symbols", help="search names defined in the project")
    symbols.add_argument("query")
    return main_parser


def keep_parses() -> None:
    """jedi's parse cache in $TMPDIR when it is set. llm-ide's sandbox gives each command an empty home, so jedi's
    default (~/.cache/jedi) went with every call, and each call parsed the whole project again (about twice the CPU
    of a call that finds its parses: 3.2 s against 1.6 s for `symbols` in flask); $TMPDIR is the run's scratch, kept
    across its commands. jedi checks each cached parse against its file's modification time."""
    if os.environ.get("TMPDIR"):
        jedi.settings.cache_directory = os.path.join(tempfile.gettempdir(), "jedi")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    keep_parses()
    root = Path(args.root or os.getcwd())
    navigator = Navigator(root, args.python, args.limit)
    try:
        if args.command == "symbols":
            lines = navigator.render(navigator.symbols(args.query))
            what = f"no symbol matches {args.query!r} under {navigator.root}"
        else:
            definitions = locate(navigator, args)
            if args.command == "definition":
                lines = navigator.render(definitions)
            else:
                lines = navigator.render(navigator.references(definitions), sort=True)
            what = f"no {args.command} found for {' '.join(args.location)} in {args.path}"
    except NavigatorError as error:
        print(f"navigator: {error}")
        return 2
    print("\n".join(lines) if lines else f"navigator: {what}")
    return 0 if lines else 1
