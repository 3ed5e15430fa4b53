"""The files as the code view last read them, through a `FileSource`: each path's latest read (or the parse that
still describes it), the files asked for read in one `read_files` call, each read reused while held, and the index of
each content's stripped lines (what an output is matched against); codeview/view.py parses and renders on top."""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from llm_ide.codeview.index import FileIndex, display_lines
from llm_ide.environments.base import FileSnapshot, FileSource
from llm_ide.state.context import normalize_path


@dataclass(frozen=True)
class LineKeys:
    """One file content's lines stripped, their indentation, and where each stripped text occurs (1-based)."""

    stripped: list[str]
    indents: list[int]
    where: dict[str, list[int]]

    @classmethod
    def of(cls, lines: list[str]) -> LineKeys:
        stripped = list(map(str.strip, lines))
        indents = list(map(operator.sub, map(len, lines), map(len, map(str.lstrip, lines))))  # (len - len lstripped)
        where: dict[str, list[int]] = {}
        for number, text in enumerate(stripped, start=1):
            if text in where:
                where[text].append(number)
            elif len(text) > 2:
                where[text] = [number]
        return cls(stripped, indents, where)

    def has(self, number: int, text: str) -> bool:
        return 1 <= number <= len(self.stripped) and self.stripped[number - 1] == text.strip()


class FileReads:
    """Each path's latest read, kept until read again (`refresh`): a snapshot, or the cached parse (codeview/view.py)
    of the same bytes; the rest use the latest read, reading a file not yet read."""

    def __init__(self, source: FileSource, root: str | None = None, max_files: int = 512) -> None:
        self.source = source
        self.root = root if root is not None else str(getattr(source, "workdir", "") or getattr(source, "root", ""))
        self.max_files = max_files
        self._current: dict[str, FileIndex | FileSnapshot | None] = {}
        self._parsed: OrderedDict[str, FileIndex] = OrderedDict()
        self._paths: dict[str, str] = {}
        self._keys: dict[str, list[tuple[bytes, LineKeys]]] = {}  # stripped-line indexes of a file's last 2 contents
        self._held: dict[str, FileSnapshot | None] | None = None  # the reads while held

    def path(self, path: str) -> str:
        normalized = self._paths.get(path)
        if normalized is None:
            normalized = self._paths[path] = normalize_path(path, self.root)
        return normalized

    def refresh(self, paths: Iterable[str]) -> None:
        """Read these files now, in one `read_files` call."""
        wanted = list(dict.fromkeys(self.path(path) for path in paths))
        if not wanted:
            return
        held, unread = self._held or {}, [path for path in wanted if self._held is None or path not in self._held]
        snapshots = held | (self.source.read_files(unread) if unread else {})
        self._held = None if self._held is None else snapshots
        for path in wanted:
            snapshot = snapshots.get(path)
            index = self._parsed.get(path)
            if snapshot is not None and index is not None and _describes(index, snapshot):
                self._current[path] = index
                self._parsed.move_to_end(path)
            else:
                self._current[path] = snapshot
        if len(self._current) > 4 * self.max_files:
            for path in list(self._current)[: len(self._current) - 2 * self.max_files]:
                del self._current[path]

    @contextmanager
    def held(self) -> Iterator[None]:
        """Within, each file is read once and its read reused, as if read again (for renders while no command runs)."""
        self._held = {}
        try:
            yield
        finally:
            self._held = None

    def invalidate(self) -> None:
        """Forget the latest reads (not the parses): the next lookup of each file reads it again."""
        self._current.clear()

    def existing(self, paths: Iterable[str]) -> list[str]:
        """Those of `paths` that name a file of the repository (read in one call), normalised."""
        wanted = [path for path in dict.fromkeys(self.path(p) for p in paths) if path and not path.startswith("../")]
        self.refresh(wanted)
        return [path for path in wanted if self._current.get(path) is not None]

    def exists(self, path: str) -> bool:
        path = self.path(path)
        if self._current.get(path) is None:
            self.refresh([path])
        return self._current[path] is not None

    def lines(self, path: str) -> list[str] | None:
        """The file's display lines as last read (read now if it was not), without parsing it; None: no such file."""
        path = self.path(path)
        if path not in self._current:
            self.refresh([path])
        entry = self._current[path]
        if entry is None or isinstance(entry, FileIndex):
            return entry.lines if entry else None
        return display_lines(entry.data)

    def line_keys(self, path: str) -> LineKeys | None:
        """The index of the file's stripped lines as last read (read now if it was not), built once per content."""
        path = self.path(path)
        if path not in self._current:
            self.refresh([path])
        if (entry := self._current[path]) is None:
            return None
        known = self._keys.get(path, [])
        for data, keys in known:
            if data is entry.data or data == entry.data:
                return keys  # (a file not parsed has no lines ready: they are split only to build these)
        keys = LineKeys.of(entry.lines if isinstance(entry, FileIndex) else display_lines(entry.data))
        self._keys[path] = [(entry.data, keys), *known[:1]]
        if len(self._keys) > self.max_files:
            del self._keys[next(iter(self._keys))]
        return keys

    def recent(self, count: int) -> list[str]:
        """The files parsed last (the code context renders and scopes them), the latest first."""
        return list(reversed(self._parsed))[:count]


def _describes(index: FileIndex, snapshot: FileSnapshot) -> bool:
    """Same size, mtime and content (compared exactly: a same-size edit with the mtime restored is still seen)."""
    data = snapshot.data
    return len(data) == len(index.data) and snapshot.mtime_ns == index.mtime_ns and data == index.data
