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
