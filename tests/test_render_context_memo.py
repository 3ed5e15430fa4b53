"""The render node's shortcuts give what the plain way gives: a code view held reads each file once and answers as if
it had read it again (the same renders, parse order and lookups)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from codeview_cases import CountingFiles
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_ide.codeview import CodeView, LocalFiles
from llm_ide.config import load_config
from llm_ide.conversation import params_text
from llm_ide.nodes.snapshot import briefs, clip
from llm_ide.prompting import render
from llm_ide.state.context import Chunk
from llm_ide.state.operations import OperationNode
from llm_ide.text import first_sentence
from llm_ide.variant import AgentContext


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


SHARED = AgentContext(settings=load_config("default"), model=cast(Any, None), codebase=cast(Any, None))  # one memo
WORDS = st.sampled_from(["Fix it.", "Fix it. Then test", "Look at a.py.", "x" * 300, "", "Fix it.\n\nMore."])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(WORDS, WORDS, st.sampled_from(["ls", "cat a.py", "y" * 300])), min_size=2, max_size=5))
def test_a_brief_kept_from_an_earlier_render_is_the_brief_written_anew(steps: list[tuple[str, str, str]]) -> None:
    """Whatever changed since (a verdict's summary, the next thought, the action), one run's memo gives each node's
    brief as written from scratch: thought and action cut short, the summary unless the next thought begins with it."""
    nodes = [
        OperationNode(
            id=i, parent_id=i - 1 if i else None, thought=t, summary=s, action_type="bash", action_params={"command": c}
        )
        for i, (t, s, c) in enumerate(steps)
    ]
    memory, templates = SHARED.settings.memory, SHARED.templates
    expected = [
        render(
            templates,
            "operation_brief",
            node=node,
            thought=clip(node.thought, memory.history_thought_chars),
            params=clip(params_text(node), memory.history_params_chars),
            summary="" if node.summary == first_sentence(after.thought) else node.summary or "(none)",
        )
        for node, after in zip(nodes, nodes[1:], strict=False)
    ]
    assert briefs(SHARED, nodes, nodes[1:]) == expected


def test_sizes_asked_later_leave_the_view_as_sizing_each_chunk_at_once_would(tmp_path: Path) -> None:
    """Files parsed, read again, changed since their parse or never parsed, with room for only two parses (so the
    lookups evict each other): the sizes asked (some, in another order) are those `chunk_size` gives, and the view's
    reads, parses and order are the same as after sizing every chunk in turn."""
    for name in "abcd":
        (tmp_path / f"{name}.py").write_text(f"class {name.upper()}:\n    def f(self):\n        return 1\n\nx = 2\n")
    places = [("a", [3], "f"), ("c", [5], ""), ("b", [1, 2], "f"), ("a", [5], ""), ("d", [2], "f"), ("gone", [1], "")]
    chunks = [Chunk(f"{name}.py", lines, function=function) for name, lines, function in places]
    sources = [CountingFiles(tmp_path), CountingFiles(tmp_path)]
    eager, lazy = (CodeView(source, max_files=2) for source in sources)
    for view in (eager, lazy):
        view.line_count("a.py"), view.line_count("b.py")  # an earlier step's parses
    (tmp_path / "b.py").write_text("def g():\n    return 3\n")
    expected = [eager.chunk_size(chunk) for chunk in chunks]
    size = lazy.sizes(chunks)
    assert [size(i) for i in (4, 0, 5, 2)] == [expected[i] for i in (4, 0, 5, 2)]
    assert [size(i) for i in range(len(chunks))] == expected
    assert sources[0].calls == sources[1].calls and len(sources[0].calls) > 3
    assert list(eager._parsed) == list(lazy._parsed) and list(eager._current) == list(lazy._current)
    assert eager.recent(2) == lazy.recent(2) and eager._former.keys() == lazy._former.keys()
