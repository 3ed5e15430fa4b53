"""An edited file's index from its previous one (codeview/index.py): tree-sitter parses again only the one edited
span, and the frames of the nodes the edit left as they were are copied, moved by the rows it added or removed,
rather than walked again."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from llm_ide.text import shared_start

if TYPE_CHECKING:
    from tree_sitter import Parser, Tree


class Indexed(Protocol):
    """What an edit reads of a file's index and appends to the next one (codeview/index.py's FileIndex)."""

    data: bytes
    tree: Tree | None
    frames: list[Any]
    definitions: list[Any]
    spans: list[tuple[int, int, int]]


@dataclass
class Edit:
    """How a file's new parse relates to its previous index: the one edited byte span (`start`, `old_end` before,
    `new_end` after), the rows it added (negative: removed), and the new parse's byte ranges whose structure changed
    (tree-sitter's changed ranges and the edited span). A frame whose node lies clear of them is the previous one,
    moved."""

    previous: Indexed
    start: int
    old_end: int
    new_end: int
    rows: int
    dirty: list[tuple[int, int]]
    copies: int = 0  # frames copied
    _firsts: dict[tuple[int, int, int], int] | None = None
    _definition_frames: list[int] | None = None

    def copied(self, index: Indexed, first: int, end: int, kind: int, parent: int, owner: int) -> bool:
        """Whether the frame whose node spans `first..end` (of grammar kind `kind`; from its decorators when it has
        some) and all frames inside it were copied from the previous index (under `parent`, in `owner`)."""
        if any(first <= high and low <= end for low, high in self.dirty):
            return False
        shift, rows = (self.new_end - self.old_end, self.rows) if end >= self.start else (0, 0)
        if self._firsts is None:
            self._firsts = {span: number for number, span in enumerate(self.previous.spans)}
        old = self._firsts.get((first - shift, end - shift, kind))
        if old is None:
            return False
        frames, definitions = self.previous.frames, self.previous.definitions
        above = frames[frames[old].parent].owner if frames[old].parent >= 0 else -1
        if _names(definitions, above) != _names(index.definitions, owner):
            return False  # the definitions inside are named after another class or function now
        stop = old + 1
        while stop < len(frames) and frames[stop].parent >= old:
            stop += 1
        if self._definition_frames is None:
            self._definition_frames = [definition.frame for definition in definitions]
        low, high = bisect_left(self._definition_frames, old), bisect_left(self._definition_frames, stop)
        self.copies += stop - old
        self._copy(index, (old, stop), (low, high), shift, rows, parent, owner, above)
        return True

    def _copy(
        self,
        index: Indexed,
        frame_range: tuple[int, int],
        definition_range: tuple[int, int],
        shift: int,
        rows: int,
        parent: int,
        owner: int,
        old_owner: int,
    ) -> None:
        """The previous index's frames `frame_range` and definitions `definition_range` appended to `index`: moved
        by `rows` and renumbered, the outermost under `parent`, those owned outside the range owned by `owner` (the
        same objects where nothing moved: neither is ever changed once built)."""
        (old, stop), (low, high) = frame_range, definition_range
        frames, definitions, spans = self.previous.frames, self.previous.definitions, self.previous.spans
        frame_offset, definition_offset = len(index.frames) - old, len(index.definitions) - low
        if (
            not rows
            and not frame_offset
            and not definition_offset
            and frames[old].parent == parent
            and old_owner == owner
        ):
            index.frames += frames[old:stop]
            index.definitions += definitions[low:high]
        else:
            for number in range(old, stop):
                frame = frames[number]
                above = parent if number == old else frame.parent + frame_offset
                inner = frame.owner + definition_offset if frame.owner >= low else owner
                index.frames.append(
                    type(frame)(frame.start + rows, frame.header_end + rows, frame.end + rows, above, inner)
                )
            index.definitions += [
                type(d)(d.frame + frame_offset, d.start + rows, d.end + rows, d.class_name, d.function, d.qualname)
                for d in definitions[low:high]
            ]
        index.spans += spans[old:stop] if not shift else [(a + shift, b + shift, k) for a, b, k in spans[old:stop]]


def _names(definitions: list[Any], owner: int) -> tuple[str, str]:
    return (definitions[owner].class_name, definitions[owner].function) if owner >= 0 else ("", "")


def reparse(parser: Parser, data: bytes, previous: Indexed) -> tuple[Tree, Edit]:
    """A parse of `data`, reusing the previous parse through the one edited span between the two contents."""
    assert previous.tree is not None
    old = previous.data
    start = shared_start(old, data)
    tail = shared_start(old[start:][::-1], data[start:][::-1])
    old_end, new_end = len(old) - tail, len(data) - tail
    start_point = _point(old, start)
    old_point, new_point = _point(old, old_end, start_point[0], start), _point(data, new_end, start_point[0], start)
    edited = previous.tree.copy()
    edited.edit(start, old_end, new_end, start_point, old_point, new_point)
    tree = parser.parse(data, edited)
    dirty = [(changed.start_byte, changed.end_byte) for changed in edited.changed_ranges(tree)]
    return tree, Edit(previous, start, old_end, new_end, new_point[0] - old_point[0], [*dirty, (start, new_end)])


def _point(data: bytes, offset: int, row: int = 0, known: int = 0) -> tuple[int, int]:
    """(row, byte column) of `offset`, counting rows from `known` (an offset at most `offset`, on row `row`)."""
    return row + data.count(b"\n", known, offset), offset - data.rfind(b"\n", 0, offset) - 1
