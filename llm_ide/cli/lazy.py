"""Commands imported when they run: `llm-ide --version`, `--help` and the completion of a command's name import none
of them (the agent, LangGraph and every variant take a second or more); each command's module is imported once it
is the one run (or its own help is asked for)."""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import typer
import typer.main
from click import Context
from typer.core import TyperCommand, TyperGroup

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Lazy:
    """A command by where it is: `module:attribute`, a command function or a typer app (a group of commands)."""

    module: str  # a module of llm_ide/cli, by its name
    attribute: str

    def load(self, name: str) -> Any:
        target = getattr(importlib.import_module(f"llm_ide.cli.{self.module}"), self.attribute)
        if isinstance(target, typer.Typer):
            command = typer.main.get_group(target)
        else:
            single = typer.Typer(add_completion=False)
            single.command(name)(target)
            command = typer.main.get_command(single)
        command.name = name
        flow(command)
        return command

    def help(self) -> str:
        """The command's help as its source says it (a function's docstring, a typer app's `help=`), unimported."""
        return flowing(source_help(HERE / f"{self.module}.py", self.attribute))


def flowing(text: str) -> str:
    """Help text with each paragraph on one line: typer's rich help keeps a docstring's line breaks (a command's row
    in its group's list would break where the source does); rich wraps the line to the terminal instead. A paragraph
    marked `\\b` stays as written (click's mark)."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(part if part.startswith("\b") else " ".join(part.split("\n")) for part in paragraphs)


def flow(command: Any) -> None:
    """`flowing` on the help of `command` and of every command under it."""
    command.help = flowing(command.help or "")
    for sub in getattr(command, "commands", {}).values():
        flow(sub)


@cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def source_help(path: Path, attribute: str) -> str:
    for node in parsed(path).body:
        if isinstance(node, ast.FunctionDef) and node.name == attribute:
            return ast.get_docstring(node) or ""
        named = isinstance(node, ast.Assign) and any(getattr(t, "id", None) == attribute for t in node.targets)
        if named and isinstance(node.value, ast.Call):
            given = {keyword.arg: keyword.value for keyword in node.value.keywords}
            if isinstance(given.get("help"), ast.Constant):
                return str(given["help"].value)
    return ""


class LazyGroup(TyperGroup):
    """A typer group whose commands (`lazy`: name → where) are imported when one is resolved; while the group lists
    them (its help, the completion of a command's name) each is a stand-in carrying its help."""

    lazy: dict[str, Lazy] = {}
    listing = False

    def list_commands(self, ctx: Context) -> list[str]:
        return [*super().list_commands(ctx), *(name for name in self.lazy if name not in self.commands)]

    def get_command(self, ctx: Context, cmd_name: str) -> Any:
        if cmd_name in self.commands or cmd_name not in self.lazy:
            return super().get_command(ctx, cmd_name)
        if self.listing:
            return TyperCommand(cmd_name, help=self.lazy[cmd_name].help())
        self.commands[cmd_name] = self.lazy[cmd_name].load(cmd_name)
        return self.commands[cmd_name]

    @contextmanager
    def listed(self) -> Iterator[None]:
        self.listing = True
        try:
            yield
        finally:
            self.listing = False

    def format_help(self, ctx: Context, formatter: Any) -> None:
        with self.listed():
            super().format_help(ctx, formatter)

    def shell_complete(self, ctx: Context, incomplete: str) -> list[Any]:
        with self.listed():
            return super().shell_complete(ctx, incomplete)


def lazy_group(commands: dict[str, str]) -> type[LazyGroup]:
    """A LazyGroup class for these commands (`name: "module:attribute"`), in this order."""
    table = {name: Lazy(*where.split(":")) for name, where in commands.items()}
    return type("Commands", (LazyGroup,), {"lazy": table})
