from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from codeview_cases import CountingFiles

from llm_ide.codeview import CodeView, FileIndex, LocalFiles, build_index
from llm_ide.codeview.index import MAX_PARSED_BYTES
from llm_ide.state.context import Chunk, Scope

SOURCE = '''
import os


class Outer(Base):
    """Doc."""

    class Inner:
        def method(self):
            def helper():
                return 1
            return helper()

    @property
    def value(self):
        return self._value

    @value.setter
    def value(self, new):
        self._value = new


def make():
    class Local:
        def run(self):
            return 2

    return Local
'''


@pytest.fixture
def view(tmp_path: Path) -> CodeView:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(textwrap.dedent(SOURCE).lstrip("\n"))
    (tmp_path / "notes.md").write_text("# Title\n\ntext\n")
    return CodeView(LocalFiles(tmp_path))


def test_scopes_group_lines_by_innermost_class_and_function(view: CodeView) -> None:
    assert view.scopes("./pkg/mod.py", [99, 1, 10, 9, 16, 20, 0, 4, 25, 5, 23, 27, 15, 19, -3]) == [
        Scope("pkg/mod.py", (1, 20), "", ""),
        Scope("pkg/mod.py", (4, 5, 16), "Outer", ""),
        Scope("pkg/mod.py", (9, 10), "Outer.Inner", "method.helper"),
        Scope("pkg/mod.py", (15, 19), "Outer", "value"),
        Scope("pkg/mod.py", (23,), "make.Local", ""),
        Scope("pkg/mod.py", (25,), "make.Local", "run"),
        Scope("pkg/mod.py", (27,), "", "make"),
    ]


def test_scopes_of_decorator_and_signature_rows_belong_to_the_definition(view: CodeView) -> None:
    assert view.scopes("pkg/mod.py", [13, 14, 8]) == [
        Scope("pkg/mod.py", (8,), "Outer.Inner", "method"),
        Scope("pkg/mod.py", (13, 14), "Outer", "value"),
    ]


def test_scopes_of_missing_file_and_non_python_file(view: CodeView) -> None:
    assert view.scopes("pkg/absent.py", [1, 2]) == []
    assert view.scopes("notes.md", [3, 1, 7]) == [Scope("notes.md", (1, 3), "", "")]


@pytest.mark.parametrize(
    ("qualname", "near", "scope", "span"),
    [
        ("Outer", None, Scope("pkg/mod.py", (4,), "Outer", "", True), (4, 19)),
        ("Outer.Inner", None, Scope("pkg/mod.py", (7,), "Outer.Inner", "", True), (7, 11)),
        ("Outer.Inner.method.helper", None, Scope("pkg/mod.py", (9,), "Outer.Inner", "method.helper", True), (9, 10)),
        ("Outer.value", None, Scope("pkg/mod.py", (13,), "Outer", "value", True), (13, 15)),
        ("Outer.value", 19, Scope("pkg/mod.py", (17,), "Outer", "value", True), (17, 19)),
        ("Outer.value", 2, Scope("pkg/mod.py", (13,), "Outer", "value", True), (13, 15)),
        ("make.Local.run", None, Scope("pkg/mod.py", (24,), "make.Local", "run", True), (24, 25)),
        (" make ", None, Scope("pkg/mod.py", (22,), "", "make", True), (22, 27)),
    ],
)
def test_symbol_scope_and_definition_range(
    view: CodeView, qualname: str, near: int | None, scope: Scope, span: tuple[int, int]
) -> None:
    assert view.symbol_scope("pkg/mod.py", qualname, near) == scope
    assert view.definition_range("pkg/mod.py", qualname, near) == span


@pytest.mark.parametrize(("path", "qualname"), [("pkg/mod.py", "Inner"), ("pkg/mod.py", "Outer.nope"), ("x.py", "f")])
def test_symbol_scope_absent(view: CodeView, path: str, qualname: str) -> None:
    assert view.symbol_scope(path, qualname) is None
    assert view.definition_range(path, qualname) is None


def test_covers_lines_and_whole_definitions_by_position(view: CodeView) -> None:
    plain = Chunk("pkg/mod.py", [9, 10], "Outer.Inner", "method.helper")
    setter = Chunk("pkg/mod.py", [17], "Outer", "value", whole_function=True)
    getter = Chunk("pkg/mod.py", [], "Outer", "value", whole_function=True)
    assert [line for line in range(1, 30) if view.covers(plain, line)] == [9, 10]
    assert [line for line in range(1, 30) if view.covers(setter, line)] == [17, 18, 19]
    assert [line for line in range(1, 30) if view.covers(getter, line)] == [13, 14, 15]


def test_chunk_size_is_the_length_of_the_chunk_rendered_alone(view: CodeView) -> None:
    chunks = [
        Chunk("pkg/mod.py", [10]),
        Chunk("pkg/mod.py", [], "Outer", "value", whole_function=True),
        Chunk("notes.md", [1, 3]),
        Chunk("gone.py", [1]),
    ]
    sizes = [view.chunk_size(chunk) for chunk in chunks]
    assert sizes == [len(view.render([chunk])) for chunk in chunks]
    assert sizes[2] == len("### File: `notes.md`\n     1\t# Title\n...\n     3\ttext")


def test_chunk_sizes_follow_each_content_even_a_same_size_edit_with_the_mtime_restored(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    versions = ["def f():\n    x = 1\n    return x\n", "y = 1234\n    x = 1\n    return x\n", "def f():\n    x = 1\n"]
    chunks = [Chunk("a.py", [2]), Chunk("a.py", [2, 3]), Chunk("a.py", [], "", "f", whole_function=True)]
    view, sizes = CodeView(LocalFiles(tmp_path)), []
    for version in [*versions, versions[0]]:
        stat = path.stat() if path.exists() else None
        path.write_text(version)
        if stat is not None and stat.st_size == len(version):
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as if untouched, but for the content
        view.refresh(["a.py"])
        for _ in range(2):  # the second time from the memo
            sizes.append([view.chunk_size(chunk) for chunk in chunks])
            assert sizes[-1] == [len(view.render([chunk], reread=False)) for chunk in chunks]
    assert sizes[0] == sizes[-1] != sizes[2] != sizes[4]


def test_exists_and_line_count(view: CodeView, tmp_path: Path) -> None:
    assert (view.exists("pkg/mod.py"), view.line_count("pkg/mod.py")) == (True, 27)
    assert (view.exists(str(tmp_path / "notes.md")), view.line_count("notes.md")) == (True, 3)
    assert (view.exists("pkg"), view.line_count("nope.py")) == (False, 0)
    (tmp_path / "nope.py").write_text("a\nb")
    assert (view.exists("nope.py"), view.line_count("nope.py")) == (True, 2)


def test_one_read_per_render_and_parses_reused_while_unchanged(tmp_path: Path) -> None:
    for name in ("a.py", "b.py", "c.txt"):
        (tmp_path / name).write_text("def f():\n    return 1\n")
    source = CountingFiles(tmp_path)
    view = CodeView(source)
    chunks = [Chunk("a.py", [2]), Chunk("./b.py", [2]), Chunk("c.txt", [1]), Chunk("a.py", [1])]
    first = view.render(chunks)
    indexes = dict(view._parsed)
    assert view.render(chunks) == first
    assert source.calls == [["a.py", "b.py", "c.txt"], ["a.py", "b.py", "c.txt"]]
    assert all(view._parsed[path] is index for path, index in indexes.items())
    (tmp_path / "b.py").write_text("def g():\n    return 2\n")
    assert "def g():" in view.render(chunks)
    assert view._parsed["a.py"] is indexes["a.py"]
    assert view._parsed["b.py"] is not indexes["b.py"]
    assert len(source.calls) == 3


def test_lookups_after_an_edit_see_the_new_file(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text("def f():\n    return 1\n")
    view = CodeView(LocalFiles(tmp_path))
    assert view.scopes("a.py", [2]) == [Scope("a.py", (2,), "", "f")]
    path.write_text("class C:\n    def g(self):\n        return 1\n")
    assert view.scopes("a.py", [3]) == [Scope("a.py", (3,), "C", "g")]
    assert view.symbol_scope("a.py", "C.g") == Scope("a.py", (2,), "C", "g", True)
    (tmp_path / "new.py").write_text("x = 1\n")
    assert view.scopes("new.py", [1, 2]) == [Scope("new.py", (1,), "", "")]


def test_local_files_reads_relative_and_absolute_paths(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.py").write_bytes(b"x\r\n")
    os.mkfifo(tmp_path / "pipe")
    files = LocalFiles(tmp_path)
    absolute = str(tmp_path / "d" / "f.py")
    snapshots = files.read_files(["d/f.py", "./d/f.py", absolute, "d", "missing.py", "d/f.py/x", "pipe"])
    assert [None if s is None else s.data for s in snapshots.values()] == [b"x\r\n"] * 3 + [None] * 4
    assert snapshots["d/f.py"].mtime_ns == (tmp_path / "d" / "f.py").stat().st_mtime_ns


def test_hot_lookups_use_the_latest_read_until_refresh_or_invalidate(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f():\n    return 1\n")
    source = CountingFiles(tmp_path)
    view = CodeView(source)
    chunk = Chunk("a.py", [1], "", "f", whole_function=True)
    view.refresh(["a.py", "b.py"])
    assert (view.covers(chunk, 2), view.exists("a.py"), view.line_count("a.py"), view.chunk_size(chunk)) == (
        True,
        True,
        2,
        len("### File: `a.py`\n     1\tdef f():\n     2\t    return 1"),
    )
    assert view.scopes("a.py", [2], fresh=False) == [Scope("a.py", (2,), "", "f")]
    assert source.calls == [["a.py", "b.py"]]
    (tmp_path / "a.py").write_text("x = 0\ndef f():\n    return 1\n")
    assert view.covers(chunk, 3) is False
    view.invalidate()
    assert view.covers(chunk, 3) is True
    assert view.exists("b.py") is False
    assert source.calls == [["a.py", "b.py"], ["a.py"], ["b.py"]]


def test_parse_cache_is_bounded(tmp_path: Path) -> None:
    for name in "abc":
        (tmp_path / f"{name}.py").write_text(f"def {name}():\n    return 1\n")
    view = CodeView(LocalFiles(tmp_path), max_files=2)
    chunks = [Chunk(f"{name}.py", [2]) for name in "abc"]
    text = view.render(chunks)
    assert text.count("### File:") == 3 and "def c():" in text
    assert list(view._parsed) == ["b.py", "c.py"]
    assert view.render(chunks[:1]) == "### File: `a.py`\n     1\tdef a():\n     2\t    return 1"
    assert list(view._parsed) == ["c.py", "a.py"]


def index_shape(index: FileIndex) -> tuple[list[tuple[int, ...]], list[tuple[object, ...]], list[int]]:
    frames = [(f.start, f.header_end, f.end, f.parent, f.owner) for f in index.frames]
    definitions = [(d.frame, d.start, d.end, d.class_name, d.function, d.qualname) for d in index.definitions]
    assert all(d.qualname == ".".join(filter(None, (d.class_name, d.function))) for d in index.definitions)
    return frames, definitions, index.frame_at


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("        def helper():", "        def helper_two(a,\n                       b):"),  # a renamed, longer header
        ("    @property\n", ""),  # a decorator gone: the definition starts later
        ("def make():", "def make(:"),  # a syntax error: ERROR nodes
        ("import os\n", "import os\nif os.name:\n    def posix():\n        pass\nelse:\n    pass\n"),  # frames added
        ("        return self._value", "        return self._valué"),  # a multi-byte character
        (SOURCE, ""),  # everything deleted
    ],
)
def test_an_edited_file_is_parsed_from_its_former_parse_as_a_fresh_parse_would(old: str, new: str) -> None:
    before = build_index("m.py", SOURCE.encode(), 1)
    edited = SOURCE.replace(old, new, 1).encode()
    incremental, fresh = build_index("m.py", edited, 2, before), build_index("m.py", edited, 2)
    assert index_shape(incremental) == index_shape(fresh)
    assert incremental.tree is not None and incremental.tree is not before.tree
    assert index_shape(build_index("m.py", SOURCE.encode(), 3, incremental)) == index_shape(before)  # and back again


def test_the_view_parses_an_edited_file_from_its_former_parse(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(SOURCE)
    view = CodeView(LocalFiles(tmp_path))
    assert [scope.function for scope in view.scopes("m.py", [11])] == ["method.helper"]
    (tmp_path / "m.py").write_text(SOURCE.replace("def helper():", "def helping():"))
    assert [scope.function for scope in view.scopes("m.py", [11])] == ["method.helping"]
    assert view.symbol_scope("m.py", "Outer.Inner.method.helper") is None


def test_a_file_back_at_a_former_content_reuses_that_parse_and_line_index_only_for_equal_bytes(tmp_path: Path) -> None:
    path, fresh = tmp_path / "m.py", CodeView(LocalFiles(tmp_path))
    view = CodeView(LocalFiles(tmp_path))
    edited = SOURCE.replace("def helper():", "def helping(a,\n                        b):")
    same_size = SOURCE.replace("return 1", "return 7")  # as long as SOURCE: only its bytes tell it apart
    seen: dict[str, tuple[FileIndex, object]] = {}
    for step, text in enumerate([SOURCE, edited, SOURCE, edited, same_size, SOURCE]):
        path.write_text(text)
        os.utime(path, ns=(10**9 * step, 10**9 * step))  # every version a new mtime
        scopes, keys = view.scopes("m.py", range(1, 45)), view.line_keys("m.py")
        index = view._parsed["m.py"]
        assert (scopes, index.mtime_ns, index_shape(index)) == (
            fresh.scopes("m.py", range(1, 45)),
            10**9 * step,
            index_shape(build_index("m.py", text.encode(), 0)),
        )
        assert keys is not None and keys.stripped == [line.strip() for line in text.splitlines()]
        if step in (2, 3):  # back at the content before the latest: that parse and line index again
            assert index.frames is seen[text][0].frames and keys is seen[text][1]
        elif text in seen:  # SOURCE after same_size: two contents ago, parsed again from the latest parse
            assert index.frames is not seen[text][0].frames
        seen[text] = (index, keys)
        assert view.scopes("m.py", [11]) == fresh.scopes("m.py", [11]) and view._parsed["m.py"] is index  # unchanged


@pytest.mark.parametrize("padding", [0, MAX_PARSED_BYTES])
def test_a_python_file_past_the_parse_limit_is_shown_as_plain_lines(tmp_path: Path, padding: int) -> None:
    """A generated 67 MB Python file took 20 s and 3 GB a view (its whole tree-sitter parse and index): past the
    limit its lines are shown as they are, without its structure; under it, the structure as always."""
    text = SOURCE + "\n" + "#" * padding + "\n"
    (tmp_path / "m.py").write_text(text)
    view = CodeView(LocalFiles(tmp_path))
    scopes = view.scopes("m.py", [11])
    index = view._parsed["m.py"]
    assert index.lines == text.splitlines() and view.line_count("m.py") == len(text.splitlines())
    parsed = padding == 0
    assert (index.tree is not None, bool(index.definitions)) == (parsed, parsed)
    assert [scope.function for scope in scopes] == (["method.helper"] if parsed else [""])  # (module level)
