"""The code view on real files: merged chunks, whole functions, odd bytes, changed and deleted files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from codeview_cases import BOX, CLASSIFY, LOAD, expected, render, write

from llm_ide.codeview import CodeView, LocalFiles
from llm_ide.state.context import Chunk


def test_overlapping_chunks_are_merged_without_duplicates(tmp_path: Path) -> None:
    assert render(tmp_path, LOAD, [3, 5], [5, 11], [11]) == expected(
        """
        ### File: `a.py`
        1| def load(path):
        2|     try:
        3|         handle = open(path)
        4|     except FileNotFoundError:
        5|         return None
        ...
        10|     finally:
        11|         cleanup()
        """
    )


def test_path_aliases_are_one_file_and_files_keep_first_seen_order(tmp_path: Path) -> None:
    write(tmp_path, "pkg/a.py", "a = 1\nb = 2\nc = 3\n")
    write(tmp_path, "b.txt", "one\ntwo\n")
    chunks = [
        Chunk("./pkg/a.py", [3]),
        Chunk("b.txt", [2]),
        Chunk("pkg//a.py", [1]),
        Chunk(str(tmp_path / "pkg" / "a.py"), [2]),
    ]
    assert CodeView(LocalFiles(tmp_path)).render(chunks) == expected(
        """
        ### File: `pkg/a.py`
        1| a = 1
        2| b = 2
        3| c = 3

        ### File: `b.txt`
        2| two
        """
    )


def test_whole_function_of_a_nested_function(tmp_path: Path) -> None:
    source = """
        class Service:
            def handle(self, request):
                def validate(payload):
                    if not payload:
                        raise ValueError("empty")
                    return payload

                return validate(request.body)
    """
    write(tmp_path, "a.py", source)
    chunk = Chunk("a.py", [3], "Service", "handle.validate", whole_function=True)
    assert CodeView(LocalFiles(tmp_path)).render([chunk]) == expected(
        """
        ### File: `a.py`
        1| class Service:
        2|     def handle(self, request):
        3|         def validate(payload):
        4|             if not payload:
        5|                 raise ValueError("empty")
        6|             return payload
        """
    )


@pytest.mark.parametrize(
    ("lines", "rows"),
    [
        (
            [7],
            [
                "1| class Box:",
                "...",
                "6|     @value.setter",
                "7|     def value(self, new):",
                "8|         self._value = new",
            ],
        ),
        ([], ["1| class Box:", "2|     @property", "3|     def value(self):", "4|         return self._value"]),
    ],
)
def test_whole_function_duplicates_resolved_by_position(tmp_path: Path, lines: list[int], rows: list[str]) -> None:
    write(tmp_path, "a.py", BOX)
    chunk = Chunk("a.py", lines, "Box", "value", whole_function=True)
    assert CodeView(LocalFiles(tmp_path)).render([chunk]) == expected("### File: `a.py`\n" + "\n".join(rows))


def test_whole_function_inside_a_compound_statement_and_mixed_with_line_chunks(tmp_path: Path) -> None:
    source = """
        import typing

        if typing.TYPE_CHECKING:
            def hint(x):
                return x
        else:
            def hint(x):
                return None
    """
    write(tmp_path, "a.py", source)
    chunks = [Chunk("a.py", [8], "", "hint", whole_function=True), Chunk("a.py", [1])]
    assert CodeView(LocalFiles(tmp_path)).render(chunks) == expected(
        """
        ### File: `a.py`
        1| import typing
        ...
        3| if typing.TYPE_CHECKING:
        ...
        6| else:
        7|     def hint(x):
        8|         return None
        """
    )


def test_whole_function_whose_name_is_gone_shows_its_lines(tmp_path: Path) -> None:
    write(tmp_path, "a.py", CLASSIFY)
    chunk = Chunk("a.py", [3], "", "renamed", whole_function=True)
    assert CodeView(LocalFiles(tmp_path)).render([chunk]) == expected(
        """
        ### File: `a.py`
        1| def classify(n):
        2|     if n < 0:
        3|         kind = "negative"
        """
    )


def test_syntax_error_file_renders_best_effort(tmp_path: Path) -> None:
    source = "def broken(:\n    x = 1\n\nclass Fine:\n    def ok(self):\n        y = 0\n        return 2\n"
    assert render(tmp_path, source, [2, 7]) == expected(
        """
        ### File: `a.py`
        1| def broken(:
        2|     x = 1
        ...
        4| class Fine:
        5|     def ok(self):
        ...
        7|         return 2
        """
    )


def test_unparseable_garbage_still_shows_the_chosen_lines(tmp_path: Path) -> None:
    source = ")))(((\n::: def\n    class [\n\tlambda ]]\n"
    assert render(tmp_path, source, [2, 4]) == expected("### File: `a.py`\n2| ::: def\n...\n4| \tlambda ]]")


def test_crlf_line_endings_are_stripped_for_display(tmp_path: Path) -> None:
    source = b"def f():\r\n    if x:\r\n        return 1\r\n    return 2\r\n"
    assert render(tmp_path, source, [3]) == expected(
        """
        ### File: `a.py`
        1| def f():
        2|     if x:
        3|         return 1
        """
    )


def test_form_feed_does_not_split_lines(tmp_path: Path) -> None:
    source = b"def a():\n    return 1\n\x0c\ndef b():\n    x = 1  # \x0c inside\n    return x\n"
    text = render(tmp_path, source, [3, 5])
    assert text == "### File: `a.py`\n     3\t\x0c\n     4\tdef b():\n     5\t    x = 1  # \x0c inside"


def test_only_newline_separates_lines(tmp_path: Path) -> None:
    source = "a = 1  # \x0b \x1c \x1d \x1e \x85 \u2028 \u2029 \r x\ndef f():\n    return 2\n".encode()
    text = render(tmp_path, source, [1, 3])
    assert text.split("\n") == [
        "### File: `a.py`",
        "     1\ta = 1  # \x0b \x1c \x1d \x1e \x85 \u2028 \u2029 \r x",
        "     2\tdef f():",
        "     3\t    return 2",
    ]


def test_tab_indented_file_keeps_tabs(tmp_path: Path) -> None:
    source = b"class T:\n\tdef m(self):\n\t\tif self:\n\t\t\treturn 1\n\t\treturn 2\n"
    assert render(tmp_path, source, [4]) == (
        "### File: `a.py`\n     1\tclass T:\n     2\t\tdef m(self):\n     3\t\t\tif self:\n     4\t\t\t\treturn 1"
    )
    assert (
        render(tmp_path, source, [5])
        == "### File: `a.py`\n     1\tclass T:\n     2\t\tdef m(self):\n...\n     5\t\t\treturn 2"
    )


def test_non_utf8_bytes_are_replaced_and_line_numbers_stay_right(tmp_path: Path) -> None:
    source = b"def f():\n    s = '\xff\xfe\x80'\n    if s:\n        return s\n"
    assert render(tmp_path, source, [2, 4]) == expected(
        """
        ### File: `a.py`
        1| def f():
        2|     s = '\ufffd\ufffd\ufffd'
        3|     if s:
        4|         return s
        """
    )


def test_nul_bytes_are_made_harmless(tmp_path: Path) -> None:
    source = b"def f():\n    a = 1\x00\x00\n    if a:\n        return a\n"
    text = render(tmp_path, source, [2, 4])
    assert "\x00" not in text
    assert text == expected(
        """
        ### File: `a.py`
        1| def f():
        2|     a = 1\ufffd\ufffd
        3|     if a:
        4|         return a
        """
    )


def test_deleted_file_renders_header_and_note(tmp_path: Path) -> None:
    path = write(tmp_path, "gone.py", CLASSIFY)
    view = CodeView(LocalFiles(tmp_path))
    chunks = [Chunk("gone.py", [3]), Chunk("kept.txt", [1])]
    write(tmp_path, "kept.txt", "kept\n")
    assert view.render(chunks).startswith("### File: `gone.py`\n     1\tdef classify(n):")
    path.unlink()
    assert view.render(chunks) == "### File: `gone.py`\n[file not found]\n\n### File: `kept.txt`\n     1\tkept"
    assert not view.exists("gone.py")
    assert view.scopes("gone.py", [1]) == []


def test_lines_past_eof_are_dropped_and_a_shrunk_file_is_reread(tmp_path: Path) -> None:
    path = write(tmp_path, "a.py", CLASSIFY)
    view = CodeView(LocalFiles(tmp_path))
    chunks = [Chunk("a.py", [3, 7, 50])]
    assert view.render(chunks) == expected(
        """
        ### File: `a.py`
        1| def classify(n):
        2|     if n < 0:
        3|         kind = "negative"
        ...
        6|     else:
        7|         kind = "positive"
        """
    )
    path.write_text("def classify(n):\n    if n < 0:\n        kind = 1\n")
    assert view.render(chunks) == expected(
        """
        ### File: `a.py`
        1| def classify(n):
        2|     if n < 0:
        3|         kind = 1
        """
    )
    path.write_text("x = 1\n")
    assert view.render(chunks) == "### File: `a.py`\n[none of the chosen lines exist: the file has 1 lines]"


def test_stale_cache_same_size_and_mtime_is_still_rerendered(tmp_path: Path) -> None:
    path = write(tmp_path, "a.py", "def alpha():\n    return 1\n")
    view = CodeView(LocalFiles(tmp_path))
    chunk = Chunk("a.py", [2])
    assert view.render([chunk]) == expected("### File: `a.py`\n1| def alpha():\n2|     return 1")
    stat = path.stat()
    path.write_text("class Betas:\n    x = 2   \n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size
    assert path.stat().st_mtime_ns == stat.st_mtime_ns
    assert view.render([chunk]) == expected("### File: `a.py`\n1| class Betas:\n2|     x = 2   ")
    assert view.scopes("a.py", [2])[0].class_name == "Betas"


def test_non_python_file_shows_plain_numbered_lines(tmp_path: Path) -> None:
    source = "def f():\n    if x:\n        y\nz\n  w\n"
    assert render(tmp_path, source, [3, 5, 9], name="notes.txt") == expected(
        "### File: `notes.txt`\n3|         y\n...\n5|   w"
    )


def test_python_detected_by_shebang(tmp_path: Path) -> None:
    source = "#!/usr/bin/env python3\ndef f():\n    return 1\n"
    assert render(tmp_path, source, [3], name="tool") == expected("### File: `tool`\n2| def f():\n3|     return 1")


def test_five_thousand_line_file(tmp_path: Path) -> None:
    methods = "".join(
        f"    def m{k}(self):\n        if self.ok:\n            return {k}\n        return 0\n" for k in range(1250)
    )
    source = "class Big:\n" + methods
    assert source.count("\n") == 5001
    # method k occupies lines 2+4k .. 5+4k
    assert render(tmp_path, source, [4000, 4999, 5001]) == expected(
        """
        ### File: `a.py`
        1| class Big:
        ...
        3998|     def m999(self):
        3999|         if self.ok:
        4000|             return 999
        ...
        4998|     def m1249(self):
        4999|         if self.ok:
        ...
        5001|         return 0
        """
    )


def test_empty_chunk_list_renders_nothing(tmp_path: Path) -> None:
    assert CodeView(LocalFiles(tmp_path)).render([]) == ""


def test_deeply_nested_file_does_not_hit_the_recursion_limit(tmp_path: Path) -> None:
    # 500 nested blocks make a syntax tree about 1,000 nodes deep: a recursive walk would exceed Python's limit.
    depth = 500
    source = "".join(" " * i + f"if x{i}:\n" for i in range(depth)) + " " * depth + "pass\n"
    rows = [f"{i + 1:>6}\t" + " " * i + f"if x{i}:" for i in range(depth)]
    assert render(tmp_path, source, [depth + 1]) == "\n".join(
        ["### File: `a.py`", *rows, f"{depth + 1:>6}\t" + " " * depth + "pass"]
    )
