from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from llm_ide.codeview import CodeView, LocalFiles
from llm_ide.state.context import (
    Activity,
    Chunk,
    Reference,
    ScoreParams,
    count_references,
    parse_references,
    with_operation,
)

MOD = """
    import os


    class Outer:
        class Inner:
            def method(self):
                def helper():
                    return 1

                return helper()

        def run(self):
            return 2


    def top(x):
        y = x + 1
        return y


    def make():
        class Local:
            def go(self):
                return 3

        return Local
"""

DECO = """
    import functools


    @functools.cache
    def cached(n):
        return n
"""

NOTES = "first\nsecond\nthird\nfourth\nfifth\n"


@pytest.fixture
def view(tmp_path: Path) -> CodeView:
    (tmp_path / "mod.py").write_text(textwrap.dedent(MOD).lstrip("\n"))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "deco.py").write_text(textwrap.dedent(DECO).lstrip("\n"))
    (tmp_path / "notes.txt").write_text(NOTES)
    (tmp_path / "README.md").write_text("# Title\n\nUsage: run it.\n")
    return CodeView(LocalFiles(tmp_path))


def base_chunks() -> list[Chunk]:
    return [
        Chunk("mod.py", [6, 9], "Outer.Inner", "method", activity=Activity([1, 0], [0, 0])),
        Chunk("mod.py", [17, 18], "", "top", activity=Activity([0, 1], [0, 0])),
        Chunk("mod.py", [16], "", "top", whole_function=True, activity=Activity([0, 0], [1, 0])),
        Chunk("notes.txt", [2], activity=Activity([1, 1], [0, 0])),
    ]


@pytest.mark.parametrize(
    ("text", "refs"),
    [
        ("The bug is here [1](a.py:12).", [Reference("a.py", 12, 12)]),
        ("the loop [k](pkg/b.py:3-7) runs twice", [Reference("pkg/b.py", 3, 7)]),
        ("reversed [2](a.py:20-10)", [Reference("a.py", 10, 20)]),
        ("backticks [3](`a.py:5`) and [4](`a.py:8-9`)", [Reference("a.py", 5, 5), Reference("a.py", 8, 9)]),
        ("spaces [1]( a.py:5 - 9 )", [Reference("a.py", 5, 9)]),
        ("alias [1](./pkg//c.py:2)", [Reference("pkg/c.py", 2, 2)]),
        ("backslashes [1](pkg\\c.py:4)", [Reference("pkg/c.py", 4, 4)]),
        (
            "Raised in [1](a.py:3), called from [2](pkg/b.py:40-42); again [3](a.py:3)",
            [Reference("a.py", 3, 3), Reference("pkg/b.py", 40, 42), Reference("a.py", 3, 3)],
        ),
        (
            "links [x](http://example.com) [y](https://example.com:8080/a) [docs](README.md) [1](a.py)",
            [],
        ),
        ("bare a.py:12 and (a.py:12) and a column [1](a.py:12:5)", [Reference("a.py", 12, 12)]),
        ("line zero [1](a.py:0) and [2](a.py:0-3)", []),
        ("", []),
    ],
)
def test_parse_references(text: str, refs: list[Reference]) -> None:
    assert parse_references(text) == refs


@pytest.mark.parametrize(
    ("text", "root", "refs"),
    [
        ("[1](/repo/pkg/a.py:4)", "/repo", [Reference("pkg/a.py", 4, 4)]),
        ("[1](/repo//a.py:4-6)", "/repo/", [Reference("a.py", 4, 6)]),
        ("[1](/elsewhere/a.py:4) [2](../up.py:1)", "/repo", []),
    ],
)
def test_parse_references_relative_to_root(text: str, root: str, refs: list[Reference]) -> None:
    assert parse_references(text, root) == refs


NEW = tuple[str, list[int], str, str]


@pytest.mark.parametrize(
    ("text", "counts", "new", "grown"),
    [
        ("inside [1](mod.py:9)", {0: 1}, [], {}),
        ("covered twice [1](mod.py:17)", {1: 1, 2: 1}, [], {}),
        ("whole function only [1](mod.py:16)", {2: 1}, [], {}),
        ("several [1](mod.py:18) [2](mod.py:6) [3](mod.py:9)", {0: 2, 1: 1, 2: 1}, [], {}),
        ("alias [1](./mod.py:9)", {0: 1}, [], {}),
        ("absolute [1]({root}/mod.py:9)", {0: 1}, [], {}),
        ("new chunk [1](mod.py:7)", {4: 1}, [("mod.py", [7], "Outer.Inner", "method.helper")], {}),
        ("same new line twice [1](mod.py:24) [2](mod.py:24)", {4: 2}, [("mod.py", [24], "make.Local", "go")], {}),
        ("same function, new line [1](mod.py:10)", {0: 1}, [], {0: [6, 9, 10]}),
        (
            "range [1](mod.py:9-17)",
            {0: 1, 1: 1, 2: 1, 4: 1, 5: 1, 6: 1},
            [("mod.py", [11], "Outer", ""), ("mod.py", [12, 13], "Outer", "run"), ("mod.py", [14, 15], "", "")],
            {0: [6, 9, 10]},
        ),
        (
            "range [1](mod.py:18-21)",
            {1: 1, 2: 1, 4: 1, 5: 1},
            [("mod.py", [19, 20], "", ""), ("mod.py", [21], "", "make")],
            {},
        ),
        ("text file [1](notes.txt:2) [2](notes.txt:5)", {3: 2}, [], {3: [2, 5]}),
        ("new text chunk [1](README.md:3)", {4: 1}, [("README.md", [3], "", "")], {}),
        ("decorated [1](pkg/deco.py:4)", {4: 1}, [("pkg/deco.py", [4], "", "cached")], {}),
        ("missing files [1](missing.py:3) [2](pkg/none.py:1-4) [3](pkg:1)", {}, [], {}),
        ("past the end [1](mod.py:500) [2](notes.txt:6-9)", {}, [], {}),
        ("partly past the end [1](notes.txt:4-9)", {3: 1}, [], {3: [2, 4, 5]}),
        ("no references here: mod.py:9", {}, [], {}),
    ],
)
def test_count_references(
    view: CodeView, text: str, counts: dict[int, int], new: list[NEW], grown: dict[int, list[int]]
) -> None:
    chunks = base_chunks()
    refs = parse_references(text.format(root=view.root), view.root)
    result = count_references(chunks, refs, view.exists, view.scopes, view.covers, n_operations=2)
    assert result == counts
    base = base_chunks()
    for index, lines in grown.items():
        base[index].lines = lines
    assert chunks[:4] == base
    assert chunks[4:] == [Chunk(path, lines, cls, fn, False, Activity([0, 0], [0, 0])) for path, lines, cls, fn in new]

    chunks = with_operation(chunks, set(), result, 2, ScoreParams())
    assert [c.activity.referred for c in chunks[:4]] == [
        [0, 0, counts.get(0, 0)],
        [0, 0, counts.get(1, 0)],
        [1, 0, counts.get(2, 0)],
        [0, 0, counts.get(3, 0)],
    ]
    assert [c.activity.referred for c in chunks[4:]] == [[0, 0, counts[i]] for i in range(4, len(chunks))]
    assert {len(c.activity.accessed) for c in chunks} == {3}


@pytest.mark.parametrize(
    ("chunk", "covered"),
    [
        (Chunk("mod.py", [6], "Outer.Inner", "method", True), [6, 7, 8, 9, 10]),
        (Chunk("mod.py", [6, 9], "Outer.Inner", "method"), [6, 9]),
        (Chunk("mod.py", [7], "Outer.Inner", "method.helper", True), [7, 8]),
        (Chunk("mod.py", [16], "", "top", True), [16, 17, 18]),
        (Chunk("mod.py", [22], "make.Local", "", True), [22, 23, 24]),
        (Chunk("mod.py", [12], "Outer", "run", True), [12, 13]),
        (Chunk("mod.py", [3, 30], "Outer", "gone", True), [3, 30]),
        (Chunk("pkg/deco.py", [5], "", "cached", True), [4, 5, 6]),
    ],
)
def test_covers_whole_definition(view: CodeView, chunk: Chunk, covered: list[int]) -> None:
    assert [line for line in range(1, 31) if view.covers(chunk, line)] == covered


def test_references_to_a_whole_function_chunk_count_once_per_reference(view: CodeView) -> None:
    chunks = [Chunk("pkg/deco.py", [5], "", "cached", whole_function=True, activity=Activity([1], [0]))]
    refs = parse_references("decorator [1](pkg/deco.py:4), body [2](pkg/deco.py:6), all [3](pkg/deco.py:4-6)")
    assert count_references(chunks, refs, view.exists, view.scopes, view.covers, n_operations=1) == {0: 3}
    assert chunks == [Chunk("pkg/deco.py", [5], "", "cached", whole_function=True, activity=Activity([1], [0]))]


def test_reference_sees_the_current_file(view: CodeView, tmp_path: Path) -> None:
    chunks: list[Chunk] = []
    refs = parse_references("[1](later.py:2)")
    assert count_references(chunks, refs, view.exists, view.scopes, view.covers, n_operations=1) == {}
    (tmp_path / "later.py").write_text("class K:\n    x = 1\n")
    assert count_references(chunks, refs, view.exists, view.scopes, view.covers, n_operations=1) == {0: 1}
    assert chunks == [Chunk("later.py", [2], "K", "", False, Activity([0], [0]))]
