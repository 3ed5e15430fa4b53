from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from llm_ide.state.context import Chunk, Scope, add_scope, normalize_path

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
