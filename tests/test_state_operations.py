from __future__ import annotations

from dataclasses import replace

import pytest

from llm_ide import verdict
from llm_ide.nodes.branch import parent
from llm_ide.state.operations import OperationNode, all_lessons, failed_ids, reasoning_chain
from llm_ide.verdict import Verdict


def next_parent(nodes: list[OperationNode]) -> int | None:
    return parent(nodes[-1] if nodes else None)


def with_verdict(nodes: list[OperationNode], found: Verdict) -> list[OperationNode]:
    return [*nodes[:-1], verdict.judged(nodes[-1], found)]


def tree(*spec: tuple[int, int | None] | tuple[int, int | None, bool]) -> list[OperationNode]:
    """Nodes in creation order from (id, parent_id[, bad_action]) triples."""
    return [OperationNode(id=s[0], parent_id=s[1], bad_action=s[2] if len(s) > 2 else False) for s in spec]


def grow(flags: list[bool | None]) -> list[OperationNode]:
    """The tree an agent builds: each new node placed by the verdict on its predecessor (`branch`)."""
    nodes: list[OperationNode] = []
    for index, flag in enumerate(flags):
        if nodes and flag is not None:
            nodes = with_verdict(nodes, Verdict(flag, ""))
        nodes = [*nodes, OperationNode(id=index, parent_id=next_parent(nodes))]
    return nodes


TWENTY_BAD = [(1, None), *[(i, 1, True) for i in range(2, 22)], (22, 1), (23, 22), (24, 23)]


@pytest.mark.parametrize(
    ("nodes", "chain", "failed"),
    [
        pytest.param(tree((1, None), (2, 1), (3, 2), (4, 3)), [1, 2, 3, 4], set(), id="straight"),
        pytest.param(tree((1, None), (2, 1, True), (3, 1), (4, 3)), [1, 3, 4], {2}, id="bad-then-sibling"),
        pytest.param(
            tree((1, None, True), (2, None, True), (3, None), (4, 3), (5, 4)),
            [3, 4, 5],
            {1, 2},
            id="top-level-alternatives",
        ),
        pytest.param(tree((1, None), (2, 1), (3, 2, True)), [1, 2, 3], set(), id="bad-last"),
        pytest.param(tree((1, None), (2, 1, True), (3, 1, True)), [1, 3], {2}, id="bad-last-after-bad-sibling"),
        pytest.param(tree((1, None, True), (2, None, True)), [2], {1}, id="only-bad-top-level"),
        pytest.param(tree(*TWENTY_BAD), [1, 22, 23, 24], set(range(2, 22)), id="twenty-bad-siblings"),
        pytest.param(
            tree(*[(i, None, True) for i in range(1, 21)], (21, None), (22, 21)),
            [21, 22],
            set(range(1, 21)),
            id="twenty-bad-top-level",
        ),
        pytest.param(
            tree((1, None), (2, 1, True), (3, 1), (4, 3), (5, 4, True), (6, 4), (7, 6)),
            [1, 3, 4, 6, 7],
            {2, 5},
            id="sibling-later-got-children",
        ),
        pytest.param(
            tree((1, None), (2, 1), (3, 2, True), (4, 2, True), (5, 2)),
            [1, 2, 5],
            {3, 4},
            id="children-all-failed-last-included",
        ),
        pytest.param(
            tree((40, None, True), (7, None), (13, 7, True), (2, 7), (99, 2)),
            [7, 2, 99],
            {40, 13},
            id="ids-not-positions",
        ),
        pytest.param(tree((1, None)), [1], set(), id="single"),
        pytest.param(tree((1, None, True)), [1], set(), id="single-bad"),
        pytest.param([], [], set(), id="empty"),
    ],
)
def test_reasoning_chain(nodes: list[OperationNode], chain: list[int], failed: set[int]) -> None:
    result = reasoning_chain(nodes)
    assert [node.id for node in result] == chain
    assert failed_ids(nodes) == failed
    if nodes:
        assert result[-1] is nodes[-1]


@pytest.mark.parametrize(
    ("flags", "parents", "chain"),
    [
        ([None, False, None], [None, 0, 1], [0, 1, 2]),
        ([None, True, True, False], [None, None, None, 2], [2, 3]),
        ([None, False, True, True, False, False], [None, 0, 0, 0, 3, 4], [0, 3, 4, 5]),
        ([None, False, False, True], [None, 0, 1, 1], [0, 1, 3]),
        ([None] + [True] * 20 + [False, False], [None] * 21 + [20, 21], [20, 21, 22]),
    ],
)
def test_placement_by_reflection(flags: list[bool | None], parents: list[int | None], chain: list[int]) -> None:
    nodes = grow(flags)
    assert [node.parent_id for node in nodes] == parents
    assert [node.id for node in reasoning_chain(nodes)] == chain
    assert [node.bad_action for node in nodes] == [*flags[1:], None]


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        ([], None),
        ([OperationNode(id=5, parent_id=None)], 5),
        (tree((5, None)), 5),
        (tree((5, None, True)), None),
        (tree((1, None), (2, 1), (3, 2)), 3),
        (tree((1, None), (2, 1), (3, 2, True)), 2),
        (tree((1, None), (2, 1, True), (3, 1, None)), 3),
    ],
)
def test_next_parent(nodes: list[OperationNode], expected: int | None) -> None:
    assert next_parent(nodes) == expected


def test_a_verdict_is_stored_on_the_last_node_without_mutating_the_input() -> None:
    nodes = [
        OperationNode(id=0, parent_id=None, bad_action=False),
        OperationNode(id=1, parent_id=0, thought="edit", action_type="edit"),
    ]
    before = [replace(node) for node in nodes]
    judged = with_verdict(nodes, Verdict(True, "broke tests", "- run tests"))
    assert nodes == before  # input untouched
    assert judged is not nodes and judged[0] is nodes[0]  # unchanged nodes shared, last replaced
    last = judged[-1]
    assert (last.bad_action, last.summary, last.lessons, last.judged_when_run) == (
        True,
        "broke tests",
        "- run tests",
        False,
    )
    assert (last.thought, last.action_type) == ("edit", "edit")
    assert next_parent(judged) == 0  # sibling of the bad node
    assert next_parent(nodes) == 1  # not judged yet: its child
    given = verdict.given(nodes[-1], Verdict(True, "denied", "no"))
    assert given.judged_when_run and not verdict.by_model(given) and verdict.by_model(last)
    assert verdict.due(nodes) and not verdict.due(judged) and not verdict.due([])


def test_all_lessons_every_node_one_per_line_deduplicated() -> None:
    nodes = [
        replace(tree((1, None))[0], lessons="- Read the traceback first\n* keep edits small\n\n"),
        replace(tree((2, 1, True))[0], lessons="• grep before editing\n  - Read the traceback first  \n"),
        replace(tree((3, 1))[0], lessons=""),
        replace(tree((4, 3, True))[0], lessons="run the failing test alone\nkeep edits small\n -  \n"),
        replace(tree((5, 3))[0], lessons="*   check imports after a rename"),
    ]
    assert failed_ids(nodes) == {2, 4}
    assert all_lessons(nodes) == [
        "Read the traceback first",
        "keep edits small",
        "grep before editing",
        "run the failing test alone",
        "check imports after a rename",
    ]


@pytest.mark.parametrize(
    ("lessons", "expected"),
    [
        ([], []),
        (["", "   \n\n"], []),
        (["a\nb", "b\na", "c"], ["a", "b", "c"]),
        (["- x\n- y", "* y\n• z"], ["x", "y", "z"]),
        (
            ["- **Check imports** after a rename", "* --force breaks the install", "*emphasis* stays"],
            ["**Check imports** after a rename", "--force breaks the install", "*emphasis* stays"],
        ),
    ],
)
def test_all_lessons_lines(lessons: list[str], expected: list[str]) -> None:
    nodes = [OperationNode(id=i, parent_id=i - 1 if i else None, lessons=text) for i, text in enumerate(lessons)]
    assert all_lessons(nodes) == expected
