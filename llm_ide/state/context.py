"""The memory's code chunks and their activity: what an operation accessed (`Scope`), the grounded references of its
thought (`[k](path:line)`), and each chunk's score, S_t = γ·S_{t−1} + α·A_t + β·R_t."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from itertools import accumulate

from llm_ide.state.record import Record


@dataclass
class Activity(Record):
    accessed: list[int] = field(default_factory=list)
    referred: list[int] = field(default_factory=list)
    score: float = 0.0
    scored: int = 0  # how many operations `score` covers (rescore folds in only the newer ones)


@dataclass
class Chunk(Record):
    file_path: str
    lines: list[int] = field(default_factory=list)
    class_name: str = ""
    function: str = ""
    whole_function: bool = False
    activity: Activity = field(default_factory=Activity)
    created: bool = False  # of a file the agent created (not in the base): the budget trim drops these first

    @property
    def qualname(self) -> str:
        return ".".join(part for part in (self.class_name, self.function) if part)

    @property
    def key(self) -> tuple[str, str, str, bool]:
        return self.file_path, self.class_name, self.function, self.whole_function


@dataclass(frozen=True)
class ScoreParams:
    alpha: float = 1.0
    beta: float = 1.0
    gamma: float = 0.9
    threshold: float = 0.0


@dataclass(frozen=True)
class Scope(Record):
    """One piece of code an operation touched: lines inside one class/function of a file."""

    file_path: str
    lines: tuple[int, ...]
    class_name: str = ""
    function: str = ""
    whole_function: bool = False
    created: bool = False  # the file is one the agent created

    def __post_init__(self) -> None:
        object.__setattr__(self, "lines", tuple(self.lines))  # checkpoint serializers restore tuples as lists


def normalize_path(path: str, root: str = "") -> str:
    """Repo-relative POSIX path: `./a.py`, `a//b.py` and `<root>/a.py` all name one file."""
    path = posixpath.normpath(path.replace("\\", "/")) if path else ""
    root = posixpath.normpath(root.replace("\\", "/")).rstrip("/") if root else ""
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root) + 1 :]
    return "" if path == "." else path


def score_steps(
    accessed: Iterable[int], referred: Iterable[int], params: ScoreParams, start: float = 0.0
) -> list[float]:
    """The score after each operation from `start`: S_t = γ·S_{t−1} + α·A_t + β·R_t (the inspector replays it too)."""
    steps = accumulate(zip(accessed, referred, strict=True), lambda s, e: next_score(s, e, params), initial=start)
    return list(steps)[1:]


def next_score(score: float, entry: tuple[int, int], p: ScoreParams) -> float:
    return score * p.gamma + p.alpha * entry[0] + p.beta * entry[1]  # the one place the formula lives


def referral_score(activity: Activity, params: ScoreParams) -> float:
    """S after every operation of `activity`."""
    return (score_steps(activity.accessed, activity.referred, params) or [0.0])[-1]


def rescore(chunks: Iterable[Chunk], n_operations: int, params: ScoreParams) -> None:
    """Bring every score up to date, folding in each operation not yet scored: a step costs O(chunks), not
    O(chunks × operations)."""
    for chunk in chunks:
        activity = chunk.activity
        start = activity.scored if activity.scored <= n_operations else 0
        score = activity.score if start else 0.0
        new = score_steps(activity.accessed[start:n_operations], activity.referred[start:n_operations], params, score)
        activity.score, activity.scored = new[-1] if new else score, n_operations


def find_chunk(chunks: list[Chunk], scope: Scope) -> int | None:
    key = (scope.file_path, scope.class_name, scope.function, scope.whole_function)
    return next((i for i, chunk in enumerate(chunks) if chunk.file_path == key[0] and chunk.key == key), None)


def add_scope(chunks: list[Chunk], scope: Scope, n_operations: int) -> int:
    """Index of the chunk holding `scope`: an existing chunk of the same file/class/function grows, else a new one."""
    index = find_chunk(chunks, scope)
    if index is None:
        chunks.append(
            Chunk(
                file_path=scope.file_path,
                lines=sorted(set(scope.lines)),
                class_name=scope.class_name,
                function=scope.function,
                whole_function=scope.whole_function,
                activity=Activity(accessed=[0] * n_operations, referred=[0] * n_operations),
                created=scope.created or any(c.created and c.file_path == scope.file_path for c in chunks),
            )
        )
        return len(chunks) - 1
    chunk = chunks[index]
    grown = not set(scope.lines) <= set(chunk.lines)
    if grown or (scope.created and not chunk.created):  # a changed copy in its place: `chunks` may be a state's copy
        lines = sorted(set(chunk.lines) | set(scope.lines)) if grown else chunk.lines
        chunks[index] = replace(chunk, lines=lines, created=chunk.created or scope.created)
    return index


def with_operation(
    chunks: list[Chunk], accessed: set[int], referred: dict[int, int], n: int, p: ScoreParams
) -> list[Chunk]:
    """New chunks with operation `n`'s entries (accessed: 1, its references), rescored; the state's are not copied."""
    advanced = []
    for index, c in enumerate(chunks):
        a, r, act, up = 1 if index in accessed else 0, referred.get(index, 0), c.activity, c.activity.scored == n > 0
        score = next_score(act.score, (a, r), p) if up else act.score  # up to date: its one new term
        new = Activity(act.accessed + [a], act.referred + [r], score, n + 1 if up else act.scored)
        advanced.append(Chunk(c.file_path, c.lines, c.class_name, c.function, c.whole_function, new, c.created))
    rescore([c for c in advanced if c.activity.scored != n + 1], n + 1, p)  # the others (a chunk just added)
    return advanced


def created_named(chunks: list[Chunk], command: str) -> set[int]:
    """Chunks of files the agent created that `command` names (running a scratch script shows it again)."""
    return {
        index
        for index, chunk in enumerate(chunks)
        if chunk.created and re.search(rf"(?<![\w./-]){re.escape(chunk.file_path)}(?![\w./-])", command)
    }


LEAD_IN = 12  # lines above what an output shows of a function that it shows again, when the agent saw them before


def lead_in(
    chunks: list[Chunk],
    scopes: Iterable[Scope],
    lines_of: Callable[[str], list[str] | None],
    output: Collection[str],
    shown: Callable[[str], bool],
) -> str:
    """Rows the chunk of each function (`scopes`) held within LEAD_IN lines above the first line an output (its
    stripped lines) shows of it, and the prompt (`shown`) no longer does: a view of its middle gets back its head."""
    parts = []
    for scope in scopes:
        first = min(scope.lines, default=0)
        if not (scope.function or scope.class_name) or not {first + 1, first + 2} <= set(scope.lines):
            continue  # a view of a range (three rows at least) of a definition, not a grep hit or module code
        index, text = find_chunk(chunks, scope), lines_of(scope.file_path)
        if index is None or text is None or not 1 < first <= len(text) or text[first - 1].strip() not in output:
            continue
        rows = [f"{i:>6}\t{text[i - 1]}" for i in chunks[index].lines if first - LEAD_IN <= i < first]
        rows = [row for row in rows if not shown(row) and not shown(row.split("\t", 1)[1].strip())]
        if rows:
            parts.append(f"{scope.file_path}\n" + "\n".join(rows))
    return "\n".join(parts)


REFERENCE = re.compile(
    r"\[(?P<index>[^\]\n]{1,12})\]\(\s*`?(?P<path>[^()\s:`]+):(?P<start>\d+)(?:\s*-\s*(?P<end>\d+)|:\d+)?`?\s*\)"
)
MAX_RANGE = 400


@dataclass(frozen=True)
class Reference:
    path: str
    start: int
    end: int

    @property
    def lines(self) -> range:
        return range(self.start, self.end + 1)


def parse_references(text: str, root: str = "") -> list[Reference]:
    """Grounded references `[k](path:line)`, `[k](path:line:col)` and `[k](path:a-b)` in a thought, paths normalised;
    paths outside the repository are not references to its code."""
    refs = []
    for match in REFERENCE.finditer(text):
        start = int(match["start"])
        end = int(match["end"]) if match["end"] else start
        start, end = min(start, end), max(start, end)
        path = normalize_path(match["path"], root)
        if start >= 1 and path and not path.startswith(("/", "../")) and path != "..":
            refs.append(Reference(path, start, min(end, start + MAX_RANGE - 1)))
    return refs


Locate = Callable[[str, list[int]], list[Scope]]
Covers = Callable[[Chunk, int], bool]


def count_references(
    chunks: list[Chunk],
    refs: list[Reference],
    exists: Callable[[str], bool],
    locate: Locate,
    covers: Covers,
    n_operations: int,
) -> dict[int, int]:
    """chunk index → how many references of this operation fall inside it. Lines no chunk covers become new
    chunks (their scope found by `locate`); references to files that do not exist are ignored."""
    counts: dict[int, int] = {}
    for ref in refs:
        if not exists(ref.path):
            continue
        hit, uncovered = set(), []
        in_file = [(i, chunk) for i, chunk in enumerate(chunks) if chunk.file_path == ref.path]  # before any is added
        for line in ref.lines:
            inside = {i for i, chunk in in_file if covers(chunk, line)}
            hit |= inside
            if not inside:
                uncovered.append(line)
        for scope in locate(ref.path, uncovered) if uncovered else []:
            hit.add(add_scope(chunks, scope, n_operations))
        for index in hit:
            counts[index] = counts.get(index, 0) + 1
    return counts
