"""The code view's rendering of Python structure (SPEC §4): headers of every enclosing block."""

from __future__ import annotations

from pathlib import Path

import pytest
from codeview_cases import CLASSIFY, FETCH, LOAD, expected, render


def test_exact_format_of_rows_and_gaps(tmp_path: Path) -> None:
    text = render(tmp_path, "x = 1\ny = 2\nz = 3\n", [1, 3])
    assert text == "### File: `a.py`\n     1\tx = 1\n...\n     3\tz = 3"


def test_decorators_async_and_multiline_signature_with_return_type(tmp_path: Path) -> None:
    assert render(tmp_path, FETCH, [13]) == expected(
        """
        ### File: `a.py`
        4| @functools.cache
        5| @register(
        6|     name="fetch",
        7| )
        8| async def fetch(
        9|     url: str,
        10|     retries: int = 3,
        11| ) -> dict[str, int]:
        ...
        13|     return data
        """
    )


def test_line_inside_a_multiline_signature_shows_the_whole_signature(tmp_path: Path) -> None:
    assert render(tmp_path, FETCH, [9, 1]) == expected(
        """
        ### File: `a.py`
        1| import functools
        ...
        4| @functools.cache
        5| @register(
        6|     name="fetch",
        7| )
        8| async def fetch(
        9|     url: str,
        10|     retries: int = 3,
        11| ) -> dict[str, int]:
        """
    )


def test_nested_def_in_def(tmp_path: Path) -> None:
    source = """
        def outer(x):
            y = x + 1

            def inner(z):
                w = z * 2
                return w

            return inner(y)
    """
    assert render(tmp_path, source, [5], [8]) == expected(
        """
        ### File: `a.py`
        1| def outer(x):
        ...
        4|     def inner(z):
        5|         w = z * 2
        ...
        8|     return inner(y)
        """
    )


def test_class_in_class(tmp_path: Path) -> None:
    source = '''
        class Outer:
            """Doc."""

            class Inner(Base):
                flag = True

                def method(self):
                    return self.flag
    '''
    assert render(tmp_path, source, [8]) == expected(
        """
        ### File: `a.py`
        1| class Outer:
        ...
        4|     class Inner(Base):
        ...
        7|         def method(self):
        8|             return self.flag
        """
    )


@pytest.mark.parametrize(
    ("line", "rows"),
    [
        (7, ["1| def classify(n):", "2|     if n < 0:", "...", "6|     else:", '7|         kind = "positive"']),
        (5, ["1| def classify(n):", "2|     if n < 0:", "...", "4|     elif n == 0:", '5|         kind = "zero"']),
        (3, ["1| def classify(n):", "2|     if n < 0:", '3|         kind = "negative"']),
        (8, ["1| def classify(n):", "...", "8|     return kind"]),
    ],
)
def test_if_elif_else_shows_the_if_and_the_containing_clause_only(tmp_path: Path, line: int, rows: list[str]) -> None:
    assert render(tmp_path, CLASSIFY, [line]) == expected("### File: `a.py`\n" + "\n".join(rows))


@pytest.mark.parametrize(
    ("line", "rows"),
    [
        (7, ["6|     except OSError as error:", "7|         raise RuntimeError(path) from error"]),
        (5, ["4|     except FileNotFoundError:", "5|         return None"]),
        (9, ["8|     else:", "9|         data = handle.read()"]),
        (11, ["10|     finally:", "11|         cleanup()"]),
    ],
)
def test_try_except_else_finally_shows_try_and_the_containing_clause(
    tmp_path: Path, line: int, rows: list[str]
) -> None:
    assert render(tmp_path, LOAD, [line]) == expected(
        "### File: `a.py`\n1| def load(path):\n2|     try:\n...\n" + "\n".join(rows)
    )


def test_except_star(tmp_path: Path) -> None:
    source = """
        try:
            run()
        except* ValueError as group:
            log(group)
        except* (TypeError, KeyError):
            pass
    """
    assert render(tmp_path, source, [6], [4]) == expected(
        """
        ### File: `a.py`
        1| try:
        ...
        3| except* ValueError as group:
        4|     log(group)
        5| except* (TypeError, KeyError):
        6|     pass
        """
    )


def test_while_else(tmp_path: Path) -> None:
    source = """
        while queue:
            item = queue.pop()
            if item is None:
                break
        else:
            finished = True
    """
    assert render(tmp_path, source, [6]) == expected(
        """
        ### File: `a.py`
        1| while queue:
        ...
        5| else:
        6|     finished = True
        """
    )
    assert render(tmp_path, source, [4]) == expected(
        """
        ### File: `a.py`
        1| while queue:
        ...
        3|     if item is None:
        4|         break
        """
    )


def test_async_for_else(tmp_path: Path) -> None:
    source = """
        async def scan(items):
            async for item in items:
                if item.ok:
                    continue
            else:
                report()
    """
    assert render(tmp_path, source, [6]) == expected(
        """
        ### File: `a.py`
        1| async def scan(items):
        2|     async for item in items:
        ...
        5|     else:
        6|         report()
        """
    )


def test_parenthesised_multi_item_with_header_shown_whole(tmp_path: Path) -> None:
    source = """
        async def copy(a, b):
            prepare()
            async with (
                open(a) as source,
                open(b, "w") as target,
            ):
                target.write(source.read())
            done()
    """
    assert render(tmp_path, source, [7]) == expected(
        """
        ### File: `a.py`
        1| async def copy(a, b):
        ...
        3|     async with (
        4|         open(a) as source,
        5|         open(b, "w") as target,
        6|     ):
        7|         target.write(source.read())
        """
    )


def test_match_case_with_guard(tmp_path: Path) -> None:
    source = """
        def route(command):
            match command.split():
                case ["go", direction] if direction in EXITS:
                    move(direction)
                case ["look"]:
                    describe()
                case _:
                    complain()
    """
    assert render(tmp_path, source, [4], [8]) == expected(
        """
        ### File: `a.py`
        1| def route(command):
        2|     match command.split():
        3|         case ["go", direction] if direction in EXITS:
        4|             move(direction)
        ...
        7|         case _:
        8|             complain()
        """
    )


def test_multiline_if_condition_is_shown_whole(tmp_path: Path) -> None:
    source = """
        def check(a, b):
            total = 0
            if (
                a
                and b
            ):
                return True
            return total
    """
    assert render(tmp_path, source, [7]) == expected(
        """
        ### File: `a.py`
        1| def check(a, b):
        ...
        3|     if (
        4|         a
        5|         and b
        6|     ):
        7|         return True
        """
    )


def test_nested_compound_statements_show_every_enclosing_header(tmp_path: Path) -> None:
    source = """
        def deep(rows):
            count = 0
            for row in rows:
                count += 1
                try:
                    prepare(row)
                    with lock:
                        log(row)
                        if row:
                            process(row)
                except KeyError:
                    pass
    """
    assert render(tmp_path, source, [10], [12]) == expected(
        """
        ### File: `a.py`
        1| def deep(rows):
        ...
        3|     for row in rows:
        ...
        5|         try:
        ...
        7|             with lock:
        ...
        9|                 if row:
        10|                     process(row)
        11|         except KeyError:
        12|             pass
        """
    )


def test_line_inside_a_docstring(tmp_path: Path) -> None:
    source = '''
        def documented():
            """Summary.

            Details on
            several lines.
            """
            return 1
    '''
    assert render(tmp_path, source, [4]) == expected(
        """
        ### File: `a.py`
        1| def documented():
        ...
        4|     Details on
        """
    )


def test_module_level_lines_have_no_header(tmp_path: Path) -> None:
    source = """
        import os

        CONSTANT = 3


        def f():
            return CONSTANT
    """
    assert render(tmp_path, source, [3]) == expected("### File: `a.py`\n3| CONSTANT = 3")
    assert render(tmp_path, source, [7, 3]) == expected(
        """
        ### File: `a.py`
        3| CONSTANT = 3
        ...
        6| def f():
        7|     return CONSTANT
        """
    )


def test_class_body_line_shows_the_class_header(tmp_path: Path) -> None:
    assert render(tmp_path, "class A:\n    x = 1\n    y = 2\n", [3]) == expected(
        "### File: `a.py`\n1| class A:\n...\n3|     y = 2"
    )


def test_if_name_main(tmp_path: Path) -> None:
    source = """
        def main():
            print("hi")


        if __name__ == "__main__":
            setup()
            main()
    """
    assert render(tmp_path, source, [7]) == expected(
        """
        ### File: `a.py`
        5| if __name__ == "__main__":
        ...
        7|     main()
        """
    )
