from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_ide.nodes.update_activity import shown_now
from llm_ide.state.context import (
    Activity,
    Chunk,
    Scope,
    ScoreParams,
    add_scope,
    created_named,
    lead_in,
    normalize_path,
    referral_score,
    rescore,
    with_operation,
)
from llm_ide.state.operations import OperationNode
from llm_ide.state.selection import copy_chunks, select_chunks, trim_to_budget


def chunk(name: str, accessed: list[int], referred: list[int] | None = None, score: float = 0.0) -> Chunk:
    return Chunk(
        name, [1], activity=Activity(accessed, referred if referred is not None else [0] * len(accessed), score)
    )


@pytest.mark.parametrize(
    ("accessed", "referred", "params", "expected"),
    [
        ([1, 0, 1], [0, 2, 1], ScoreParams(1, 1, 0.9), 1 * 0.81 + 2 * 0.9 + 2 * 1),
        ([1, 0, 1], [0, 2, 1], ScoreParams(1, 1, 1.0), 5.0),
        ([1, 1, 0, 1], [0, 0, 3, 1], ScoreParams(1, 1, 0.5), 0.125 + 0.25 + 1.5 + 2.0),
        ([1, 0, 1], [0, 2, 1], ScoreParams(2, 0.5, 0.9), 2 * 0.81 + 0.5 * 2 * 0.9 + 2.5),
        ([1, 1, 1], [4, 0, 0], ScoreParams(0, 1, 0.5), 1.0),
        ([0, 0, 1, 0, 0], [0, 0, 0, 0, 0], ScoreParams(1, 1, 0.9), 0.81),
        ([1, 1], [3, 2], ScoreParams(1, 1, 0.0), 3.0),
        ([0, 0, 0], [0, 0, 0], ScoreParams(1, 1, 0.9), 0.0),
        ([], [], ScoreParams(1, 1, 0.9), 0.0),
    ],
)
def test_referral_score(accessed: list[int], referred: list[int], params: ScoreParams, expected: float) -> None:
    assert referral_score(Activity(accessed, referred), params) == pytest.approx(expected)


def test_referral_score_of_the_spec_example_is_4_61() -> None:
    assert referral_score(Activity([1, 0, 1], [0, 2, 1]), ScoreParams()) == pytest.approx(4.61)


@pytest.mark.parametrize(
    ("gamma", "expected"),
    [
        (0.9, [0.729 + 0.81, 0.9 + 2.0, 1.0, 0.0]),
        (1.0, [2.0, 3.0, 1.0, 0.0]),
        (0.5, [0.125 + 0.25, 0.5 + 2.0, 1.0, 0.0]),
    ],
)
def test_rescore_chunks_of_different_ages(gamma: float, expected: list[float]) -> None:
    chunks = [
        chunk("old.py", [1, 0, 0, 0], [0, 1, 0, 0]),
        chunk("mid.py", [0, 0, 1, 0], [0, 0, 0, 2]),
        chunk("new.py", [0, 0, 0, 1], [0, 0, 0, 0]),
        chunk("idle.py", [0, 0, 0, 0], [0, 0, 0, 0], score=7.0),
    ]
    rescore(chunks, 4, ScoreParams(gamma=gamma))
    assert [c.activity.score for c in chunks] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("threshold", "kept"),
    [
        (1.0, ["last.py", "high.py"]),
        (0.0, ["last.py", "equal.py", "high.py", "low.py"]),
        (0.75, ["last.py", "equal.py", "high.py"]),
        (10.0, ["last.py"]),
    ],
)
def test_select_chunks_threshold_and_latest_access(threshold: float, kept: list[str]) -> None:
    chunks = [
        chunk("last.py", [0, 0, 1]),
        chunk("equal.py", [0, 1, 0], [0, 1, 0]),
        chunk("high.py", [1, 0, 0], [0, 0, 2]),
        chunk("low.py", [1, 1, 0]),
        chunk("idle.py", [0, 0, 0]),
    ]
    params = ScoreParams(gamma=0.5, threshold=threshold)
    rescore(chunks, 3, params)
    assert [c.activity.score for c in chunks] == pytest.approx([1.0, 1.0, 2.25, 0.75, 0.0])
    assert [c.file_path for c in select_chunks(chunks, params)] == kept


@pytest.mark.parametrize(
    ("scores", "accessed_last", "sizes", "budget", "kept"),
    [
        ([3, 1, 2, 0.5], [], [100] * 4, 400, [0, 1, 2, 3]),
        ([3, 1, 2, 0.5], [], [100] * 4, 1000, [0, 1, 2, 3]),
        ([3, 1, 2, 0.5], [], [100] * 4, 350, [0, 1, 2]),
        ([3, 1, 2, 0.5], [], [100] * 4, 250, [0, 2]),
        ([3, 1, 2, 0.5], [3], [100] * 4, 250, [0, 3]),
        ([3, 1, 2, 0.5], [1, 3], [100] * 4, 150, [1, 3]),
        ([3, 1, 2, 0.5], [0, 1, 2, 3], [100] * 4, 50, [0, 1, 2, 3]),
        ([3, 1, 2, 0.5], [], [100] * 4, 0, []),
        ([0.1, 0.2, 5], [], [10, 500, 10], 100, [2]),
        ([0.1, 0.2, 5], [], [500, 10, 10], 100, [1, 2]),
    ],
)
def test_trim_to_budget(
    scores: list[float], accessed_last: list[int], sizes: list[int], budget: int, kept: list[int]
) -> None:
    chunks = [chunk(f"{i}.py", [1, 1 if i in accessed_last else 0], score=s) for i, s in enumerate(scores)]
    assert trim_to_budget(chunks, sizes.__getitem__, budget) == [chunks[i] for i in kept]


@pytest.mark.parametrize(
    ("scores", "created", "accessed_last", "budget", "kept"),
    [
        ([3, 1, 2, 0.5], [0], [], 300, [1, 2, 3]),  # a created chunk goes first, whatever its score
        ([3, 1, 2, 0.5], [0, 2], [], 250, [1, 3]),
        ([3, 1, 2, 0.5], [0, 2], [], 150, [1]),
        ([3, 1, 2, 0.5], [0], [0], 300, [0, 1, 2, 3]),  # just written or run: shown beside the budget
        ([3, 1, 2, 0.5], [0], [0], 250, [0, 1, 2]),
        ([3, 1, 2, 0.5], [0, 1], [0], 150, [0, 2]),
    ],
)
def test_trim_to_budget_drops_chunks_of_created_files_first(
    scores: list[float], created: list[int], accessed_last: list[int], budget: int, kept: list[int]
) -> None:
    chunks = [chunk(f"{i}.py", [1, 1 if i in accessed_last else 0], score=s) for i, s in enumerate(scores)]
    for index in created:
        chunks[index].created = True
    assert trim_to_budget(chunks, lambda _: 100, budget) == [chunks[i] for i in kept]


def dropping_until_it_fits(chunks: list[Chunk], sizes: list[int], budget: int) -> list[Chunk]:
    """The trim as it was written first: every size summed, then the chunks dropped in turn while over the budget."""
    total = sum(size for c, size in zip(chunks, sizes, strict=True) if not (c.created and c.activity.accessed[-1]))
    dropped: set[int] = set()
    for index in sorted(range(len(chunks)), key=lambda i: (not chunks[i].created, chunks[i].activity.score, -i)):
        if total <= budget:
            break
        if not chunks[index].activity.accessed[-1]:
            dropped.add(index)
            total -= sizes[index]
    return [c for i, c in enumerate(chunks) if i not in dropped]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.0]), st.booleans(), st.booleans(), st.integers(0, 60))),
    st.integers(-10, 200),
)
def test_trimming_from_the_kept_end_keeps_what_dropping_until_it_fits_keeps(
    drawn: list[tuple[float, bool, bool, int]], budget: int
) -> None:
    """Equal scores, zero sizes, created and just-accessed chunks, a budget the kept alone exceed: the same chunks,
    and no size asked of a chunk below the first one dropped."""
    chunks = [chunk(f"{i}.py", [0, int(last)], score=s) for i, (s, _, last, _) in enumerate(drawn)]
    for c, (_, created, _, _) in zip(chunks, drawn, strict=True):
        c.created = created
    sizes, asked = [size for *_, size in drawn], set()
    kept = trim_to_budget(chunks, lambda i: asked.add(i) or sizes[i], budget)
    assert kept == dropping_until_it_fits(chunks, sizes, budget)
    assert len(asked - {i for i, c in enumerate(chunks) if c in kept}) <= 1


def test_a_created_file_marks_every_chunk_of_it_and_a_command_naming_it_accesses_them() -> None:
    chunks: list[Chunk] = []
    assert add_scope(chunks, Scope("a.py", (3,), "", "f"), 1) == 0
    assert add_scope(chunks, Scope("new.py", (1, 2), "", "", created=True), 1) == 1
    assert add_scope(chunks, Scope("new.py", (5,), "", "main"), 1) == 2  # seen later by a view: still created
    assert [c.created for c in chunks] == [False, True, True]
    assert created_named(chunks, "python3 new.py && cat a.py") == {1, 2}
    assert created_named(chunks, "python3 tests/new.py; python3 new.pyc; cat new.py.bak") == set()
    assert created_named(chunks, "cd /repo && python new.py 2>&1 | tail") == {1, 2}


def test_add_scope_creates_padded_chunk_then_merges() -> None:
    chunks: list[Chunk] = []
    assert add_scope(chunks, Scope("a.py", (9, 3, 3), "C", "f"), 3) == 0
    assert chunks == [Chunk("a.py", [3, 9], "C", "f", False, Activity([0, 0, 0], [0, 0, 0]))]
    chunks[0].activity = Activity([0, 1, 0], [2, 0, 0], 1.5)
    assert add_scope(chunks, Scope("a.py", (4, 9), "C", "f"), 3) == 0
    assert chunks == [Chunk("a.py", [3, 4, 9], "C", "f", False, Activity([0, 1, 0], [2, 0, 0], 1.5))]
    assert add_scope(chunks, Scope("a.py", (3,), "C", "f"), 3) == 0
    assert chunks[0].lines == [3, 4, 9]


@pytest.mark.parametrize(
    ("scope", "index", "lines"),
    [
        (Scope("a.py", (12,), "C", "f"), 0, [3, 9, 12]),
        (Scope("a.py", (12,), "C", "f", whole_function=True), 1, [12]),
        (Scope("a.py", (12,), "D", "f"), 1, [12]),
        (Scope("a.py", (12,), "C", "f.inner"), 1, [12]),
        (Scope("a.py", (12,), "C", ""), 1, [12]),
        (Scope("b.py", (12,), "C", "f"), 1, [12]),
        (Scope("a.py", (2,), "", ""), 1, [2]),
    ],
)
def test_add_scope_key_is_file_class_function_whole(scope: Scope, index: int, lines: list[int]) -> None:
    chunks = [Chunk("a.py", [3, 9], "C", "f", activity=Activity([1, 0], [0, 1]))]
    assert add_scope(chunks, scope, 2) == index
    assert len(chunks) == index + 1
    assert chunks[index] == Chunk(
        scope.file_path,
        lines,
        scope.class_name,
        scope.function,
        scope.whole_function,
        Activity([1, 0], [0, 1]) if index == 0 else Activity([0, 0], [0, 0]),
    )


def test_with_operation_keeps_lengths_at_n_operations() -> None:
    chunks: list[Chunk] = []
    steps: list[tuple[list[Scope], dict[int, int]]] = [
        ([Scope("a.py", (1,))], {}),
        ([], {0: 2}),
        ([Scope("b.py", (5,), "K", "m"), Scope("a.py", (2,))], {1: 1}),
        ([Scope("c.py", (7,), whole_function=True)], {0: 1, 2: 3}),
        ([], {}),
    ]
    for n_operations, (scopes, referred) in enumerate(steps):
        accessed = {add_scope(chunks, scope, n_operations) for scope in scopes}
        chunks = with_operation(chunks, accessed, referred, n_operations, ScoreParams(gamma=0.5))
        assert {len(c.activity.accessed) for c in chunks} == {n_operations + 1}
        assert {len(c.activity.referred) for c in chunks} == {n_operations + 1}
    assert [(c.file_path, c.lines, c.activity.accessed, c.activity.referred) for c in chunks] == [
        ("a.py", [1, 2], [1, 0, 1, 0, 0], [0, 2, 0, 1, 0]),
        ("b.py", [5], [0, 0, 1, 0, 0], [0, 0, 1, 0, 0]),
        ("c.py", [7], [0, 0, 0, 1, 0], [0, 0, 0, 3, 0]),
    ]
    assert [c.activity.score for c in chunks] == pytest.approx([0.0625 + 0.25 + 0.25 + 0.5, 0.5, 2.0])


@pytest.mark.parametrize(
    ("path", "root", "expected"),
    [
        ("a.py", "", "a.py"),
        ("./a.py", "", "a.py"),
        ("a//b.py", "", "a/b.py"),
        ("pkg/./sub//c.py", "", "pkg/sub/c.py"),
        ("/repo/a.py", "/repo", "a.py"),
        ("/repo/a.py", "/repo/", "a.py"),
        ("/repo/pkg/a.py", "/repo", "pkg/a.py"),
        ("/repo//a.py", "/repo", "a.py"),
        ("/repo/./a.py", "/repo", "a.py"),
        ("/repo/pkg/../a.py", "/repo", "a.py"),
        ("/repo/../repo/a.py", "/repo", "a.py"),
        ("/repo", "/repo", ""),
        ("/repository/a.py", "/repo", "/repository/a.py"),
        ("/other/a.py", "/repo", "/other/a.py"),
        ("pkg/../a.py", "", "a.py"),
        ("../a.py", "", "../a.py"),
        ("pkg\\sub\\a.py", "", "pkg/sub/a.py"),
        (".\\a.py", "", "a.py"),
        ("C:\\repo\\pkg\\a.py", "C:\\repo", "pkg/a.py"),
        ("a.py", "/repo", "a.py"),
        ("", "", ""),
        (".", "", ""),
    ],
)
def test_normalize_path(path: str, root: str, expected: str) -> None:
    assert normalize_path(path, root) == expected


@pytest.mark.parametrize(("gamma", "steps"), [(0.9, 300), (1.0, 50), (0.5, 40)])
def test_incremental_rescore_step_by_step_equals_the_full_sum(gamma: float, steps: int) -> None:
    params = ScoreParams(alpha=1.5, beta=0.5, gamma=gamma)
    chunks = [chunk("a.py", []), chunk("b.py", [])]
    for step in range(steps):
        chunks = with_operation(
            chunks, {0, 1} if step % 3 == 0 else {1}, {0: step % 5, 1: (step * 7) % 3}, step, params
        )
        if step % 37 == 0:
            rescore(chunks, step + 1, params)  # rescoring twice at the same step changes nothing
    assert [c.activity.score for c in chunks] == pytest.approx([referral_score(c.activity, params) for c in chunks])
    assert [c.activity.scored for c in chunks] == [steps, steps]


@pytest.mark.parametrize("scored_behind", [0, 1, 3])
def test_with_operation_appends_rescores_and_leaves_the_state_as_it_was(scored_behind: int) -> None:
    params = ScoreParams(alpha=1.0, beta=0.5, gamma=0.8)
    histories = [([1, 0, 0, 1], [0, 2, 0, 0]), ([0, 0, 1, 1], [1, 0, 0, 3]), ([0, 0, 0, 0], [0, 0, 0, 0])]
    state = [Chunk(f"m{i}.py", [i + 1], activity=Activity(list(a), list(r))) for i, (a, r) in enumerate(histories)]
    rescore(state, 4 - scored_behind, params)  # scores folded in up to an older operation, or all of them
    before = copy_chunks(state)
    chunks = list(state)
    grown = add_scope(chunks, Scope("m0.py", (1, 7), created=True), 4)
    new = add_scope(chunks, Scope("n.py", (2,)), 4)
    done = with_operation(chunks, {grown, new}, {1: 2}, 4, params)
    assert [(c.file_path, c.lines, c.created, c.activity.accessed, c.activity.referred) for c in done] == [
        ("m0.py", [1, 7], True, [1, 0, 0, 1, 1], [0, 2, 0, 0, 0]),
        ("m1.py", [2], False, [0, 0, 1, 1, 0], [1, 0, 0, 3, 2]),
        ("m2.py", [3], False, [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]),
        ("n.py", [2], False, [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]),
    ]
    assert [c.activity.score for c in done] == pytest.approx([referral_score(c.activity, params) for c in done])
    assert {c.activity.scored for c in done} == {5}
    assert state == before  # the state's chunks untouched: add_scope put its changed copy in the list


@pytest.mark.parametrize("gamma", [0.9, 0.83, 1.0])
def test_with_operation_scores_exactly_as_rescoring_the_whole_history(gamma: float) -> None:
    params = ScoreParams(alpha=0.7, beta=1.3, gamma=gamma)
    chunks = [Chunk(f"m{i}.py", [i + 1], activity=Activity([], [])) for i in range(3)]
    for step in range(60):
        if step == 20:  # a chunk added at a later step (scored 0) and one scored ahead (a forked thread)
            chunks = [*chunks, Chunk("n.py", [1], activity=Activity([0] * step, [0] * step))]
            chunks[0] = Chunk("m0.py", [1], activity=Activity(chunks[0].activity.accessed, [0] * step, 9.5, step + 3))
        chunks = with_operation(chunks, {step % 4, 1}, {2: step % 3, 0: step % 2}, step, params)
        again = copy_chunks(chunks)
        for c in again:
            c.activity.scored = 0
        rescore(again, step + 1, params)
        assert [c.activity.score for c in chunks] == [c.activity.score for c in again]  # equal floats: same prompts


RUN = [
    "def run(argv=None):",
    '    """standalone command line access point"""',
    "    if argv is None:",
    "        argv = sys.argv[1:]",
    "",
    '    s_opts = "hdi"',
    "    l_opts = (",
    '        "help",',
    '        "duplicates=",',
    "    )",
    "    min_lines = DEFAULT_MIN",
    "    ignore_comments = False",
    "    ignore_docstrings = False",
    "    ignore_imports = False",
    "    opts, args = getopt(argv, s_opts, l_opts)",
    "    for opt, val in opts:",
    '        if opt in ("-d", "--duplicates"):',
    "            min_lines = int(val)",
]


def rows(*lines: int) -> str:
    return "sim.py\n" + "\n".join(f"{i:>6}\t{RUN[i - 1]}" for i in lines)


@pytest.mark.parametrize(
    ("seen", "view", "prompt", "expected"),
    [
        (range(1, 19), range(14, 19), set(), rows(*range(2, 14))),  # the LEAD_IN lines above the view
        ([*range(1, 5), *range(14, 19)], range(14, 19), set(), rows(2, 3, 4)),  # only lines seen before
        (range(1, 19), range(14, 19), {RUN[i].strip() for i in range(1, 12)}, rows(13)),  # none the prompt shows
        (range(1, 19), range(14, 19), {f"{i:>6}\t{RUN[i - 1]}" for i in range(2, 14)}, ""),  # nor its rows
        (range(1, 19), [14], set(), ""),  # a grep hit, no view of a range
        (range(1, 19), range(1, 6), set(), ""),  # a view from the function's head
        ([], range(14, 19), set(), ""),  # a function seen for the first time
    ],
)
def test_a_view_into_a_function_seen_before_gets_the_rows_above_it_back(
    seen: range | list[int], view: range | list[int], prompt: set[str], expected: str
) -> None:
    chunks = [Chunk("sim.py", list(seen), function="run")] if seen else []  # the function's chunk before the view
    scope = Scope("sim.py", tuple(view), function="run")
    output = {RUN[i - 1].strip() for i in view}
    assert lead_in(chunks, [scope], {"sim.py": RUN}.get, output, prompt.__contains__) == expected


def test_module_code_gets_no_rows_above() -> None:
    """Top-level statements are one chunk of the whole module: the lines above a view of them belong to no one
    definition."""
    chunks = [Chunk("sim.py", list(range(1, 19)))]
    scope = Scope("sim.py", tuple(range(14, 19)))
    output = {RUN[i - 1].strip() for i in range(14, 19)}
    assert lead_in(chunks, [scope], {"sim.py": RUN}.get, output, set().__contains__) == ""


def test_rows_a_lead_in_of_the_epoch_showed_count_as_shown() -> None:
    """The same view run again in one epoch (after each edit of the lines below) brings the rows back once."""
    first = OperationNode(id=0, parent_id=None, observation="x = 1", lead_in=rows(2, 3))
    state = {"operations": [first], "snapshot": "", "snapshot_step": 0, "pending": OperationNode(id=1, parent_id=0)}
    shown = shown_now(state)  # type: ignore[arg-type]
    assert [shown(f"{i:>6}\t{RUN[i - 1]}") for i in (2, 3, 4)] == [True, True, False]
    assert shown("x = 1") and not shown("y = 2")


def test_an_edit_whose_output_shows_no_line_of_it_gets_no_rows_above() -> None:
    """`sed -i` prints nothing: the lines it changed and three around them are accessed, not shown."""
    chunks = [Chunk("sim.py", list(range(1, 19)), function="run")]
    scope = Scope("sim.py", tuple(range(3, 10)), function="run")
    assert lead_in(chunks, [scope], {"sim.py": RUN}.get, {""}, set().__contains__) == ""
