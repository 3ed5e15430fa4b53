from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import replace

from llm_ide.codeview.index import FileIndex, build_index
from llm_ide.codeview.reads import FileReads
from llm_ide.environments.base import FileSource
from llm_ide.state.context import Chunk, Scope

MISSING_NOTE = "[file not found]"
PAST_END_NOTE = "[none of the chosen lines exist: the file has {count} lines]"


class CodeView(FileReads):
    """Renders chunks of code as SPEC §4 describes, reading files through a `FileSource`: each path's latest read kept,
    parses cached (`max_files`, least recently used out) and redone from the former one on a change; `render`, `scopes`,
    `symbol_scope` and `definition_range` re-read their files (not with `fresh=False`), the rest use the latest read."""

    def __init__(self, source: FileSource, root: str | None = None, max_files: int = 512) -> None:
        super().__init__(source, root, max_files)
        self._former: dict[str, FileIndex | None] = {}  # the parse before the latest (an undone edit's bytes)

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
