"""Shared by the code view tests: the expected-render notation, file writing, the sample sources, and a file source
that counts its reads."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from llm_ide.codeview import CodeView, LocalFiles
from llm_ide.environments.base import FileSnapshot
from llm_ide.state.context import Chunk


class CountingFiles(LocalFiles):
    """A real LocalFiles that also records each read_files call."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.calls: list[list[str]] = []

    def read_files(self, paths: list[str]) -> dict[str, FileSnapshot | None]:
        self.calls.append(list(paths))
        return super().read_files(paths)


def expected(text: str) -> str:
    """Expected render written as `N| code` rows (one space after `|`), turned into the exact SPEC §4 text."""
    out = []
    for line in textwrap.dedent(text).strip("\n").split("\n"):
        match = re.fullmatch(r"(\d+)\|(?: (.*))?", line)
        out.append(f"{int(match[1]):>6}\t{match[2] or ''}" if match else line)
    return "\n".join(out)


def write(root: Path, name: str, content: str | bytes) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content if isinstance(content, bytes) else textwrap.dedent(content).lstrip("\n").encode()
    path.write_bytes(data)
    return path


def render(root: Path, source: str | bytes, *line_sets: list[int], name: str = "a.py") -> str:
    write(root, name, source)
    return CodeView(LocalFiles(root)).render([Chunk(name, lines) for lines in line_sets])


FETCH = """
    import functools


    @functools.cache
    @register(
        name="fetch",
    )
    async def fetch(
        url: str,
        retries: int = 3,
    ) -> dict[str, int]:
        data = {}
        return data
"""

CLASSIFY = """
    def classify(n):
        if n < 0:
            kind = "negative"
        elif n == 0:
            kind = "zero"
        else:
            kind = "positive"
        return kind
"""

LOAD = """
    def load(path):
        try:
            handle = open(path)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise RuntimeError(path) from error
        else:
            data = handle.read()
        finally:
            cleanup()
        return data
"""

BOX = """
    class Box:
        @property
        def value(self):
            return self._value

        @value.setter
        def value(self, new):
            self._value = new
"""
