from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from llm_ide.codeview.index import FileIndex, build_index, display_lines
from llm_ide.codeview.matching import LineKeys
from llm_ide.environments.base import FileSnapshot, FileSource
from llm_ide.state.context import Chunk, Scope, normalize_path

MISSING_NOTE = "[file not found]"
PAST_END_NOTE = "[none of the chosen lines exist: the file has {count} lines]"


class CodeView:
    """Renders chunks of code as SPEC §4 describes, reading files through a `FileSource`: each path's latest read kept,
    parses cached (`max_files`, least recently used out) and redone from the former one on a change; `render`, `scopes`,
    `symbol_scope` and `definition_range` re-read their files (not with `fresh=False`), the rest use the latest read."""

    def __init__(self, source: FileSource, root: str | None = None, max_files: int = 512) -> None:
        self.source = source
        self.root = root if root is not None else str(getattr(source, "workdir", "") or getattr(source, "root", ""))
        self.max_files = max_files
        self._current: dict[str, FileIndex | FileSnapshot | None] = {}
        self._parsed: OrderedDict[str, FileIndex] = OrderedDict()
        self._paths: dict[str, str] = {}
        self._former: dict[str, FileIndex | None] = {}  # the parse before the latest (an undone edit's bytes)
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

    def render(self, chunks: Sequence[Chunk], reread: bool = True, hide: Collection[str] = ()) -> str:
        """The chunks, file by file; rows in `hide` (as rendered: `f"{n:>6}\\t{text}"`, e.g. rows the prompt shows
        already) are left out with the headers only they needed, and a file with nothing else to show."""
        by_file: dict[str, list[Chunk]] = {}
        for chunk in chunks:
            by_file.setdefault(self.path(chunk.file_path), []).append(chunk)
        self.refresh(by_file if reread else [path for path in by_file if path not in self._current])
        files = (_rendered(path, self._index(path), file_chunks, hide) for path, file_chunks in by_file.items())
        return "\n\n".join(text for text in files if text)

    def chunk_size(self, chunk: Chunk) -> int:
        """Characters this chunk alone renders to (its file's latest snapshot)."""
        return self.sizes([chunk])(0)

    def sizes(self, chunks: list[Chunk]) -> Callable[[int], int]:
        """Chunk i's `chunk_size`, worked out when asked (from its file as looked up now: reads, parses in order)."""
        found = [(path := self.path(chunk.file_path), self._index(path)) for chunk in chunks]
        return lambda i: _size(*found[i], chunks[i])

    def scopes(self, path: str, lines: Iterable[int], fresh: bool = True) -> list[Scope]:
        """The existing `lines` grouped by their innermost enclosing class/function, in line order."""
        path = self.path(path)
        index = self._index(path, fresh)
        if index is None:
            return []
        count = index.line_count
        groups: dict[tuple[str, str], list[int]] = {}
        for line in sorted(set(lines)):
            if 1 <= line <= count:
                definition = index.innermost_definition(line)
                key = (definition.class_name, definition.function) if definition else ("", "")
                groups.setdefault(key, []).append(line)
        return [Scope(path, tuple(group), class_name, function) for (class_name, function), group in groups.items()]

    def symbol_scope(self, path: str, qualname: str, near: int | None = None, fresh: bool = True) -> Scope | None:
        """A whole-function scope for `Class.method`, `outer.inner`, `Outer.Inner`...; None if there is none."""
        path = self.path(path)
        index = self._index(path, fresh)
        definition = index.resolve(qualname.strip(), () if near is None else (near,)) if index else None
        if definition is None:
            return None
        return Scope(path, (definition.start,), definition.class_name, definition.function, whole_function=True)

    def definition_range(
        self, path: str, qualname: str, near: int | None = None, fresh: bool = True
    ) -> tuple[int, int] | None:
        """First decorator row .. last row of the definition named `qualname`."""
        index = self._index(self.path(path), fresh)
        definition = index.resolve(qualname.strip(), () if near is None else (near,)) if index else None
        return (definition.start, definition.end) if definition else None

    def covers(self, chunk: Chunk, line: int) -> bool:
        if line in chunk.lines:
            return True
        if not chunk.whole_function:
            return False
        index = self._index(self.path(chunk.file_path))
        definition = index.resolve(chunk.qualname, chunk.lines) if index else None
        return definition is not None and definition.start <= line <= definition.end

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

    def line_count(self, path: str) -> int:
        index = self._index(self.path(path))
        return index.line_count if index else 0

    def _index(self, path: str, fresh: bool = False) -> FileIndex | None:
        if fresh or path not in self._current:
            self.refresh([path])
        entry = self._current[path]
        if entry is None or isinstance(entry, FileIndex):
            return entry
        previous = self._parsed.get(path)  # the file's former parse: only its edited span is parsed again
        if (former := self._former.pop(path, None)) is not None and former.data == entry.data:  # exact: equal bytes
            index = replace(former, mtime_ns=entry.mtime_ns)
        else:
            index = build_index(path, entry.data, entry.mtime_ns, previous)
        self._former[path] = previous
        self._current[path] = self._parsed[path] = index
        self._parsed.move_to_end(path)
        while len(self._parsed) > self.max_files:
            evicted, _ = self._parsed.popitem(last=False)
            self._current.pop(evicted, None)
            self._former.pop(evicted, None)
        return index


def _size(path: str, index: FileIndex | None, chunk: Chunk) -> int:
    """Memoised with the file's index by what the render reads of the chunk (lines, whole_function, class, function)."""
    key = (tuple(chunk.lines), chunk.whole_function, chunk.class_name, chunk.function)
    sizes = index.sizes if index is not None else {}  # (no file: nothing kept)
    if (size := sizes.get(key)) is None:
        size = sizes[key] = len(_rendered(path, index, [chunk]))
    return size


def _rendered(path: str, index: FileIndex | None, chunks: list[Chunk], hide: Collection[str] = ()) -> str:
    header = f"### File: `{path}`"
    if index is None:
        return f"{header}\n{MISSING_NOTE}"
    shown = _shown_lines(index, chunks, hide)
    if not shown:
        return "" if hide else f"{header}\n{PAST_END_NOTE.format(count=index.line_count)}"
    ordered = sorted(shown)
    rows = index.rows(ordered)
    out = [header, rows[0]]
    out += [row if b - a == 1 else "...\n" + row for a, b, row in zip(ordered, ordered[1:], rows[1:], strict=False)]
    return "\n".join(out)


def _describes(index: FileIndex, snapshot: FileSnapshot) -> bool:
    """Same size, mtime and content (compared exactly: a same-size edit with the mtime restored is still seen)."""
    data = snapshot.data
    return len(data) == len(index.data) and snapshot.mtime_ns == index.mtime_ns and data == index.data


def _shown_lines(index: FileIndex, chunks: list[Chunk], hide: Collection[str] = ()) -> set[int]:
    count = index.line_count
    shown: set[int] = set()
    for chunk in chunks:
        if chunk.whole_function and (definition := index.resolve(chunk.qualname, chunk.lines)):
            shown.update(range(definition.start, min(definition.end, count) + 1))
        shown.update(chunk.lines)
    if shown and (min(shown) < 1 or max(shown) > count):
        shown = {line for line in shown if 1 <= line <= count}
    if hide:
        lines = list(shown)
        shown = {line for line, row in zip(lines, index.rows(lines), strict=True) if row not in hide}
    shown |= index.context_rows(shown)
    return shown if max(shown, default=0) <= count else {line for line in shown if line <= count}
