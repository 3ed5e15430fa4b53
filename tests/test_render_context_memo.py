"""The render node's shortcuts give what the plain way gives: a code view held reads each file once and answers as if
it had read it again (the same renders, parse order and lookups)."""

from __future__ import annotations

from pathlib import Path

from codeview_cases import CountingFiles

from llm_ide.codeview import CodeView, LocalFiles
from llm_ide.state.context import Chunk


def renders(view: CodeView) -> list[object]:
    """What a renewal asks of the view: the files named, the code context twice (once with rows hidden), lookups."""
    chunks = [Chunk("a.py", [2]), Chunk("./b.py", [1]), Chunk("c.py", [1, 2])]
    first = view.render(chunks, reread=False)
    view.refresh(["b.py", "a.py", "gone.py"])
    hidden = view.render(chunks, reread=False, hide={"     1\tdef g():"})
    return [
        view.existing(["a.py", "gone.py", "b.py", "."]),
        first,
        view.existing(["b.py", "c.py"]),
        hidden,
        [view.chunk_size(chunk) for chunk in chunks],
        view.lines("c.py"),
        view.recent(3),
    ]


def test_a_held_view_reads_each_file_once_and_answers_as_the_plain_one(tmp_path: Path) -> None:
    for name, text in (("a.py", "def f():\n    return 1\n"), ("b.py", "def g():\n    return 2\n"), ("c.py", "x = 1\n")):
        (tmp_path / name).write_text(text)
    plain, source = CodeView(LocalFiles(tmp_path)), CountingFiles(tmp_path)
    held = CodeView(source)
    for view in (plain, held):
        view.refresh(["c.py", "a.py"])  # an earlier step's reads and parses
        view.line_count("c.py")
    (tmp_path / "a.py").write_text("def f():\n    return 3\n")  # changed since: read again once held
    source.calls.clear()
    expected = renders(plain)
    with held.held():
        assert renders(held) == expected
        reads = [path for call in source.calls for path in call]
        assert sorted(reads) == ["a.py", "b.py", "c.py", "gone.py"]  # each once, c.py too though read before
    assert (
        "return 1" in expected[1]
        and "return 3" in expected[3]
        and "def g" not in expected[3]
        and expected[0] == ["a.py", "b.py"]
        and expected[6] == ["c.py", "b.py", "a.py"]
    )
    (tmp_path / "b.py").write_text("def h():\n    return 4\n")  # after the hold: read again
    assert "def h():" in held.render([Chunk("b.py", [1])]) and source.calls[-1] == ["b.py"]
