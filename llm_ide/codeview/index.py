"""Per-file index: display lines plus, for Python, the frames (definitions and compound-statement clauses) that
decide which header rows accompany a shown line. Built once per file content; rendering is then lookups."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

from llm_ide.codeview.reparse import Edit, reparse

if TYPE_CHECKING:
    from tree_sitter import Language, Node, Parser, Tree

PYTHON_SUFFIXES = (".py", ".pyi", ".pyw")
DEFINITIONS = frozenset({"function_definition", "class_definition"})
STATEMENTS = frozenset(
    {"if_statement", "for_statement", "while_statement", "try_statement", "with_statement", "match_statement"}
)
CLAUSES = frozenset({"elif_clause", "else_clause", "except_clause", "finally_clause", "case_clause"})
FRAMES = DEFINITIONS | STATEMENTS | CLAUSES
CONTAINERS = frozenset({"module", "block", "ERROR", "decorated_definition"})
DESCEND = FRAMES | CONTAINERS


@dataclass(slots=True)
class Frame:
    """A definition, compound statement or clause: lines `start..end` (1-based, decorators included), whose header
    rows `start..header_end` are shown with any line inside it. `owner` is the innermost enclosing definition."""

    start: int
    header_end: int
    end: int
    parent: int
    owner: int


@dataclass(slots=True)
class Definition:
    frame: int
    start: int
    end: int
    class_name: str
    function: str
    qualname: str  # `class_name.function` (either may be empty), made once: every parse files them all by it


@dataclass
class FileIndex:
    """Display lines of one file content (split on `\\n` only, `\\r` of CRLF and NUL bytes made harmless) and, for
    Python, its frames. `frame_at[line]` is the innermost frame holding `line` (-1: module level)."""

    data: bytes
    mtime_ns: int
    lines: list[str]
    frames: list[Frame] = field(default_factory=list)
    frame_at: list[int] = field(default_factory=list)
    definitions: list[Definition] = field(default_factory=list)
    by_qualname: dict[str, list[int]] = field(default_factory=dict)
    tree: Tree | None = None  # the parse, kept so the next version of the file parses incrementally
    spans: list[tuple[int, int, int]] = field(default_factory=list)  # per frame: its node's bytes and kind
    chains: dict[int, frozenset[int]] = field(default_factory=lambda: {-1: frozenset()})
    sizes: dict[tuple[tuple[int, ...], bool, str, str], int] = field(default_factory=dict)  # a chunk's rendered size

    @property
    def line_count(self) -> int:
        return len(self.lines)

    def rows(self, lines: list[int]) -> list[str]:
        """The display rows `f"{line:>6}\\t{text}"` of `lines` (existing ones; built when asked: a file edited has a
        new index, which a step renders a few rows of)."""
        prefixes, text = _prefixes(self.line_count), self.lines
        return [prefixes[line - 1] + text[line - 1] for line in lines]

    def innermost_definition(self, line: int) -> Definition | None:
        frame = self.frame_at[line] if self.frame_at else -1
        owner = self.frames[frame].owner if frame >= 0 else -1
        return self.definitions[owner] if owner >= 0 else None

    def resolve(self, qualname: str, near: list[int] | tuple[int, ...] = ()) -> Definition | None:
        """The definition named `qualname`; among duplicates (a property and its setter) the one holding a line of
        `near`, else the first."""
        found = self.by_qualname.get(qualname)
        if not found:
            return None
        for index in found if len(found) > 1 else ():
            definition = self.definitions[index]
            if any(definition.start <= line <= definition.end for line in near):
                return definition
        return self.definitions[found[0]]

    def context_rows(self, lines: set[int]) -> set[int]:
        """Header rows of every frame enclosing one of `lines`: signatures and statement/clause headers."""
        if not self.frame_at:
            return set()
        frame_at = self.frame_at
        return set().union(*map(self.chain, {frame_at[line] for line in lines}))

    def chain(self, frame: int) -> frozenset[int]:
        """Header rows of `frame` and all its ancestors (memoised; computed without recursion)."""
        chains = self.chains
        found = chains.get(frame)
        if found is not None:
            return found
        missing = []
        while frame >= 0 and frame not in chains:
            missing.append(frame)
            frame = self.frames[frame].parent
        rows = chains[frame] if frame >= 0 else frozenset()
        for index in reversed(missing):
            current = self.frames[index]
            rows = chains[index] = rows.union(range(current.start, current.header_end + 1))
        return rows


_PREFIXES: list[str] = []


MAX_PARSED_BYTES = 4_000_000  # a Python file's structure is read up to this size (tree-sitter: seconds, gigabytes)


def _prefixes(count: int) -> list[str]:
    """Row prefixes `f"{n:>6}\\t"` for n = 1 to at least count (shared, grown on demand: formatting is slow)."""
    if len(_PREFIXES) < count:
        _PREFIXES.extend(f"{n:>6}\t" for n in range(len(_PREFIXES) + 1, count + 1))
    return _PREFIXES


def is_python(path: str, data: bytes) -> bool:
    if path.endswith(PYTHON_SUFFIXES):
        return True
    first = data[:200].split(b"\n", 1)[0]
    return first.startswith(b"#!") and b"python" in first


def display_lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", errors="replace")
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines


def build_index(path: str, data: bytes, mtime_ns: int, previous: FileIndex | None = None) -> FileIndex:
    """The index of `data`; `previous` (the index of the file's former content) lets tree-sitter reparse only what
    changed, and the frames of the definitions and statements it left as they were are copied, not walked again."""
    index = FileIndex(data=data, mtime_ns=mtime_ns, lines=display_lines(data))
    if is_python(path, data) and len(data) <= MAX_PARSED_BYTES:  # (larger: generated code, shown as plain lines)
        if previous is None or previous.tree is None:
            _index_python(index, _parser().parse(data))
        else:
            tree, edit = reparse(_parser(), data, previous)
            _index_python(index, tree, edit)
    return index


@cache
def _language() -> Language:
    import tree_sitter_python
    from tree_sitter import Language

    return Language(tree_sitter_python.language())


@cache
def _parser() -> Parser:
    from tree_sitter import Parser

    return Parser(_language())


@cache
def _kind_ids() -> tuple[frozenset[int], frozenset[int], frozenset[int], int, int, int]:
    """Grammar ids of the node kinds the walk cares about (cheaper to compare than type strings)."""
    language = _language()

    def ids(kinds: frozenset[str]) -> frozenset[int]:
        return frozenset(language.id_for_node_kind(kind, True) for kind in kinds) - {None}

    return (
        ids(FRAMES),
        ids(DESCEND),
        ids(DEFINITIONS),
        language.id_for_node_kind(":", False),
        language.id_for_node_kind("block", True),
        language.id_for_node_kind("decorated_definition", True),
    )


def _end_row(node: Node) -> int:
    end = node.end_point
    return end.row - 1 if end.column == 0 and end.row > node.start_point.row else end.row


def _index_python(index: FileIndex, tree: Tree, edit: Edit | None = None) -> None:
    frame_ids, descend_ids, definition_ids, colon_id, block_id, decorated_id = _kind_ids()
    index.tree = tree
    frames, definitions, spans = index.frames, index.definitions, index.spans
    # (node, parent frame, owner definition, start row and byte given by an enclosing decorated_definition)
    stack: list[tuple[Node, int, int, int, int]] = [(tree.root_node, -1, -1, -1, -1)]
    while stack:
        node, parent, owner, start_row, start_byte = stack.pop()
        kind = node.kind_id
        is_frame = kind in frame_ids
        if is_frame:
            first = node.start_byte if start_byte < 0 else start_byte
            if edit is not None and edit.copied(index, first, node.end_byte, kind, parent, owner):
                continue
        children = node.children
        child_row, child_byte = (node.start_point.row, node.start_byte) if kind == decorated_id else (-1, -1)
        if is_frame:
            row = node.start_point.row if start_row < 0 else start_row
            header_end = row
            for child in children:  # the `:` ending the header; without one, the row before the body
                child_kind = child.kind_id
                if child_kind == colon_id:
                    header_end = child.start_point.row
                    break
                if child_kind == block_id:
                    break
                header_end = child.end_point.row
            end = _end_row(node) + 1
            frame = len(frames)
            if kind in definition_ids and (name := node.child_by_field_name("name")) is not None:
                owner = _add_definition(definitions, frame, owner, node.type, name, row + 1, end)
            frames.append(Frame(row + 1, header_end + 1, end, parent, owner))
            spans.append((first, node.end_byte, kind))
            parent = frame
        stack.extend(
            (child, parent, owner, child_row, child_byte)
            for child in reversed(children)
            if child.kind_id in descend_ids
        )
    for position, definition in enumerate(definitions):
        index.by_qualname.setdefault(definition.qualname, []).append(position)
    index.frame_at = _innermost_frames(frames, index.line_count)


def _add_definition(
    definitions: list[Definition], frame: int, owner: int, kind: str, name_node: Node, start: int, end: int
) -> int:
    name = (name_node.text or b"").decode("utf-8", errors="replace")
    if owner < 0:
        class_name, function = "", ""
    else:
        outer = definitions[owner]
        class_name, function = outer.class_name, outer.function
    if kind == "class_definition":
        class_name, function = ".".join(part for part in (class_name, function, name) if part), ""
    else:
        function = f"{function}.{name}" if function else name
    qualname = f"{class_name}.{function}" if class_name and function else class_name or function
    definitions.append(Definition(frame, start, end, class_name, function, qualname))
    return len(definitions) - 1


def _innermost_frames(frames: list[Frame], line_count: int) -> list[int]:
    """frame_at[line] for lines 0..line_count (index 0 unused): frames come in pre-order, so inner ones overwrite."""
    frame_at = [-1] * (line_count + 1)
    for number, frame in enumerate(frames):
        end = min(frame.end, line_count)
        if end >= frame.start:
            frame_at[frame.start : end + 1] = [number] * (end + 1 - frame.start)
    return frame_at
