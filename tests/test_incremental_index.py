"""An edited file's index copies the frames of the definitions and statements the edit left as they were (moved by
the rows it added or removed) and walks the rest: it must equal the index a full walk of the same parse gives, for
every kind of edit (inside a method, across statements, a decorator, a rename, a syntax error, an indentation)."""

from __future__ import annotations

import random
import sysconfig
from pathlib import Path

import pytest

from llm_ide.codeview.index import FileIndex, _index_python, _parser, build_index, display_lines
from llm_ide.codeview.reparse import reparse

SNIPPETS = [
    "\n",
    "    ",
    "x = 1\n",
    "def added(a, b):\n    return a\n",
    "class Added:\n    pass\n",
    "@decorator\n",
    "else:\n    pass\n",
    "    if y:\n        z()\n",
    "(",
    ")",
    ":",
    "'''",
    "#",
    "try:\n",
    "\n\n\n",
]


def full_walk(index: FileIndex) -> FileIndex:
    """The index of the same content and parse, walked whole."""
    assert index.tree is not None
    walked = FileIndex(data=index.data, mtime_ns=index.mtime_ns, lines=display_lines(index.data))
    _index_python(walked, index.tree)
    return walked


def facts(index: FileIndex) -> tuple[object, ...]:
    return index.frames, index.definitions, index.by_qualname, index.frame_at, index.spans


def edited(data: bytes, chance: random.Random) -> bytes:
    """`data` with one edit: a span removed, a snippet put in, a name changed, a line moved or re-indented."""
    text = data.decode("utf-8", errors="replace")
    lines = text.splitlines(keepends=True)
    at = chance.randrange(len(text) + 1)
    kind = chance.randrange(6)
    if kind == 0:
        text = text[:at] + text[at + chance.randrange(1, 200) :]
    elif kind == 1:
        text = text[:at] + chance.choice(SNIPPETS) + text[at:]
    elif kind == 2 and lines:
        line = chance.randrange(len(lines))
        text = "".join(
            lines[:line]
            + [lines[line].replace("def ", "def renamed_", 1).replace("class ", "class R", 1)]
            + lines[line + 1 :]
        )
    elif kind == 3 and len(lines) > 2:
        line = chance.randrange(len(lines) - 1)
        lines.insert(chance.randrange(len(lines)), lines.pop(line))
        text = "".join(lines)
    elif kind == 4 and lines:
        line = chance.randrange(len(lines))
        lines[line] = "    " + lines[line] if chance.random() < 0.5 else lines[line].removeprefix("    ")
        text = "".join(lines)
    else:
        start = text.rfind("\n", 0, at) + 1
        text = text[:start] + "@decorator\n" + text[start:]
    return text.encode()


def sources(count: int) -> list[Path]:
    """`count` modules of the standard library, spread over its sizes (the same ones on every machine of a version)."""
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"), key=lambda path: (path.stat().st_size, path))
    return files[:: max(1, len(files) // count)][:count]


@pytest.mark.parametrize("path", sources(24), ids=lambda path: path.name)
def test_an_edited_files_index_equals_a_full_walk_of_its_parse(path: Path) -> None:
    chance = random.Random(path.name)
    data = path.read_bytes()
    index = build_index(path.name, data, 0)
    assert facts(index) == facts(full_walk(index))
    for step in range(8):
        data = edited(data, chance)
        tree, edit = reparse(_parser(), data, index)
        index = FileIndex(data=data, mtime_ns=step + 1, lines=display_lines(data))
        _index_python(index, tree, edit)
        assert facts(index) == facts(full_walk(index)), f"edit {step}"


def reindexed(before: FileIndex, source: str) -> tuple[FileIndex, int]:
    """The index of `source` built from `before`'s, and how many frames it copied."""
    tree, edit = reparse(_parser(), source.encode(), before)
    index = FileIndex(data=source.encode(), mtime_ns=1, lines=display_lines(source.encode()))
    _index_python(index, tree, edit)
    assert facts(index) == facts(full_walk(index))
    return index, edit.copies


SOURCE = (
    "class A:\n    def f(self):\n        if x:\n            return 1\n\n"
    "    def h(self):\n        pass\n\n\n@d\ndef g():\n    pass\n"
)


def test_frames_below_an_edit_move_with_it_and_keep_their_names() -> None:
    before = build_index("m.py", SOURCE.encode(), 0)
    after, copies = reindexed(before, SOURCE.replace("class A:", 'class B:\n    """doc"""'))
    assert [(d.qualname, d.start, d.end) for d in after.definitions] == [
        ("B", 1, 8),
        ("B.f", 3, 5),
        ("B.h", 7, 8),
        ("g", 11, 13),
    ]
    assert [(f.start, f.header_end, f.end, f.parent, f.owner) for f in after.frames] == [
        (1, 1, 8, -1, 0),
        (3, 3, 5, 0, 1),
        (4, 4, 5, 1, 1),
        (7, 7, 8, 0, 2),
        (11, 12, 13, -1, 3),
    ]
    assert copies == 1  # g; the class's methods are named after it: walked again


def test_an_edit_inside_one_method_copies_the_others() -> None:
    before = build_index("m.py", SOURCE.encode(), 0)
    after, copies = reindexed(before, SOURCE.replace("return 1", "return 1\n        return 2"))
    assert [(d.qualname, d.start, d.end) for d in after.definitions] == [
        ("A", 1, 8),
        ("A.f", 2, 5),
        ("A.h", 7, 8),
        ("g", 11, 13),
    ]
    assert copies == 2  # h and g


@pytest.mark.parametrize("name", ["Z", "Zebra(Base)"])
def test_a_renamed_class_names_its_methods_anew(name: str) -> None:
    before = build_index("m.py", SOURCE.encode(), 0)
    after, copies = reindexed(before, SOURCE.replace("class A:", f"class {name}:"))
    assert (
        [d.qualname for d in after.definitions] == ["Z", "Z.f", "Z.h", "g"]
        if name == "Z"
        else [
            "Zebra",
            "Zebra.f",
            "Zebra.h",
            "g",
        ]
    )
    assert copies == 1


def test_statements_copied_inside_an_edited_method_keep_it_as_their_owner() -> None:
    source = "class A:\n    def f(self):\n        y = 0\n        z = 0\n        if x:\n            return 1\n"
    before = build_index("m.py", source.encode(), 0)
    after, copies = reindexed(before, source.replace("y = 0", "def inner():\n            pass"))
    assert [d.qualname for d in after.definitions] == ["A", "A.f", "A.f.inner"]
    assert [(f.start, f.parent, f.owner) for f in after.frames] == [(1, -1, 0), (2, 0, 1), (3, 1, 2), (6, 1, 1)]
    assert copies == 1  # the `if`
