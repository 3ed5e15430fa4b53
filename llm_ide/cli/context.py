from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated

import typer

from llm_ide.cli.console import err_console, fail
from llm_ide.codeview.files import LocalFiles
from llm_ide.codeview.view import CodeView
from llm_ide.state.context import Chunk
from llm_ide.terminal import plural

LINE_SPEC = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")
MAX_LINES = 1_000_000


def parse_line_spec(spec: str) -> list[int]:
    """`12,40-45` → [12, 40, 41, 42, 43, 44, 45]; ValueError for anything else."""
    lines: set[int] = set()
    for part in spec.split(","):
        match = LINE_SPEC.match(part)
        if not match:
            raise ValueError(f"malformed line spec {spec!r}: expected numbers and ranges like 12,40-45")
        start = int(match[1])
        end = int(match[2]) if match[2] else start
        if start < 1 or end < start:
            raise ValueError(f"malformed line spec {spec!r}: lines start at 1 and ranges go upwards ({part.strip()})")
        lines.update(range(start, min(end, MAX_LINES) + 1))
    return sorted(lines)


def context_command(
    file: Annotated[
        str | None,
        typer.Argument(help="File to show (relative to the current directory or absolute)", show_default="none"),
    ] = None,
    lines: Annotated[
        str | None, typer.Option("--lines", help="Lines of interest, e.g. 12,40-45", show_default="none")
    ] = None,
    whole_function: Annotated[
        str | None,
        typer.Option("--whole-function", help="Show this whole definition, e.g. Class.method", show_default="none"),
    ] = None,
    chunks: Annotated[
        Path | None,
        typer.Option(
            "--chunks",
            help="JSON list of chunks: file_path, lines, class_name, function, whole_function (activity optional).",
            show_default="none",
        ),
    ] = None,
) -> None:
    """Render code exactly as the agent sees it in its code context: the lines of interest with their enclosing
    definitions' headers, the rest elided."""
    view = CodeView(LocalFiles(Path.cwd()))
    try:
        if chunks is not None and (file, lines, whole_function) != (None, None, None):
            raise ValueError("give either FILE with --lines/--whole-function, or --chunks chunks.json, not both")
        if chunks is not None:
            selected = _chunks_from_file(chunks)
        else:
            selected = _chunk_from_options(view, file, lines, whole_function)
    except ValueError as error:
        raise fail(str(error)) from None
    typer.echo(view.render(selected))


BINARY_PROBE = 8192  # bytes read to tell a binary file (as git does: a NUL among them)


def binary(path: Path) -> bool:
    """Whether `path` holds binary data: a NUL byte near its start (a text file in any 8-bit encoding has none)."""
    with path.open("rb") as handle:
        return b"\0" in handle.read(BINARY_PROBE)


def _chunk_from_options(view: CodeView, file: str | None, lines: str | None, whole_function: str | None) -> list[Chunk]:
    if file is None:
        raise ValueError("give a FILE (with --lines and/or --whole-function) or --chunks chunks.json")
    if lines is None and whole_function is None:
        raise ValueError("give --lines (e.g. 12,40-45) and/or --whole-function QUALNAME")
    numbers = parse_line_spec(lines) if lines is not None else []
    if not view.exists(file):
        said = f"{file} is a folder: give a source file" if Path(file).is_dir() else f"no such file: {file}"
        raise ValueError(said)
    if binary(Path(file)):
        raise ValueError(f"{file} is a binary file, not source code: nothing to render")
    count = view.line_count(file)
    past = [number for number in numbers if number > count]
    if past and len(past) == len(numbers) and whole_function is None:  # as a range that cannot be: nothing to show
        said = f"{file} is empty" if count == 0 else f"{file} has {plural(count, 'line')} (1-{count})"
        raise ValueError(f"--lines {lines}: {said}: none of the lines asked for is there")
    if past:
        from llm_ide.inspector.load import line_ranges  # (the inspector's modules: not for `context --help`)

        err_console.print(f"[dim]… {file} has {plural(count, 'line')}: {line_ranges(past)} left out[/]")
    if whole_function is None:
        return [Chunk(view.path(file), numbers)]
    scope = view.symbol_scope(file, whole_function, near=numbers[0] if numbers else None)
    if scope is None:
        raise ValueError(f"no definition named {whole_function!r} in {file}")
    return [Chunk(scope.file_path, sorted(set(numbers) | set(scope.lines)), scope.class_name, scope.function, True)]


def _chunks_from_file(path: Path) -> list[Chunk]:
    from pydantic import TypeAdapter, ValidationError

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise ValueError(f"{path} is a folder: give a chunks JSON file") from None
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None
    try:
        return TypeAdapter(list[Chunk]).validate_python(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"{path}: invalid chunk list at {where or 'top level'}: {first['msg']}") from None
