"""Which lines of a file an output showed, by content: each output row (its line-number prefix, if any, taken off) is
looked up in the file's index of stripped lines, and runs of consecutive rows equal to consecutive lines of the file
(indentation shifted alike on every row: pytest's listings, a dedented snippet) are the lines shown. A row that says
its line number counts alone when the file has that text there."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

MAX_STARTS = 16  # alignments tried for one output row (a line repeated more often anchors nothing)
MIN_CHARS = 10  # non-blank characters a run (or a lone row) needs to count as shown code
UNNAMED = (3, 40)  # non-blank rows and characters a run needs in a file neither the command nor the output names
NUMBER_PREFIX = re.compile(r"\s*(\d{1,9})(?:\t| *[|│:] ?| +|-)(.*)")  # `  12\t`, `12:`, `12-` (grep), ` 12 | `, `12  `
MARKER = re.compile(r"[>+](?=[ \t])")  # pytest's `>` on the failing line, a diff's `+`: one column of indentation


@dataclass(frozen=True)
class LineKeys:
    """One file content's lines stripped, their indentation, and where each stripped text occurs (1-based)."""

    stripped: list[str]
    indents: list[int]
    where: dict[str, list[int]]

    @classmethod
    def of(cls, lines: list[str]) -> LineKeys:
        stripped = list(map(str.strip, lines))
        indents = list(map(operator.sub, map(len, lines), map(len, map(str.lstrip, lines))))  # (len - len lstripped)
        where: dict[str, list[int]] = {}
        for number, text in enumerate(stripped, start=1):
            if text in where:
                where[text].append(number)
            elif len(text) > 2:
                where[text] = [number]
        return cls(stripped, indents, where)

    def has(self, number: int, text: str) -> bool:
        return 1 <= number <= len(self.stripped) and self.stripped[number - 1] == text.strip()


@dataclass(frozen=True)
class Row:
    """An output row as matched: its text stripped, its indentation, and the line number its prefix claims."""

    text: str
    indent: int
    number: int | None = None


def plain_row(row: str) -> Row:
    if MARKER.match(row):
        row = " " + row[1:]
    text = row.strip()
    return Row(text, len(row) - len(row.lstrip()) if text else 0)


def numbered_row(row: str) -> Row | None:
    """The row as `N<sep>text` (nl, cat -n, grep -n, awk's NR), or None."""
    match = NUMBER_PREFIX.fullmatch(row)
    if match is None:
        return None
    text = match[2]
    return Row(text.strip(), len(text) - len(text.lstrip()), int(match[1]))


def runs(
    rows: list[Row | None], keys: LineKeys, named: bool = True, claimed: set[int] | None = None, lone: bool = False
) -> set[int]:
    """Lines of the file shown by runs of consecutive rows equal to consecutive lines of it, indentation shifted alike
    (ties between alignments go to the one nearest after the previous run: files are read forwards); a run needs two
    non-blank rows of MIN_CHARS characters, or UNNAMED ones in a file that is not `named` (by the command or the
    output). With `lone` (a file the command or a grep row names) a single row counts too when every occurrence of it
    in the file is shown (grep without line numbers); a file only a traceback names has no such rows: `warnings.warn(`
    under another frame is not its line. None breaks a run. The rows of the runs found are added to `claimed`."""
    least, chars = (2, MIN_CHARS) if named else UNNAMED
    found: set[int] = set()
    singles: dict[str, int] = {}
    floor, last, at, total = 0, 0, 0, len(rows)
    while at < total:
        row = rows[at]
        starts = keys.where.get(row.text) if row is not None else None
        if row is None or not starts or len(starts) > MAX_STARTS:
            at += 1
            continue
        best, first = 0, -1
        for start in starts:
            length = _extent(rows, at, start, keys, 1, row.indent - keys.indents[start - 1])
            if length > best or (length == best and first < last <= start):
                best, first = length, start
        back = _extent(rows, at - 1, first - 1, keys, -1, row.indent - keys.indents[first - 1], floor)
        texts = [r.text for r in rows[at - back : at + best] if r and r.text]
        if len(texts) >= least and sum(map(len, texts)) >= chars:
            found.update(range(first - back, first + best))
            floor, last = at + best, first + best
            if claimed is not None:
                claimed.update(range(at - back, at + best))
        elif lone and len(texts) == 1 and len(row.text) >= MIN_CHARS:
            singles[row.text] = singles.get(row.text, 0) + 1
        at += best
    for text, seen in singles.items():
        if seen >= len(keys.where[text]):
            found.update(keys.where[text])
    return found


def _extent(rows: list[Row | None], at: int, line: int, keys: LineKeys, step: int, shift: int, floor: int = 0) -> int:
    """How many rows from `at` (going `step`) equal the lines from `line` (1-based), each non-blank one indented
    `shift` columns more than the file has it."""
    count, total = 0, len(keys.stripped)
    while floor <= at < len(rows) and 1 <= line <= total:
        row = rows[at]
        if row is None or row.text != keys.stripped[line - 1]:
            break
        if row.text and row.indent - keys.indents[line - 1] != shift:
            break
        count, at, line = count + 1, at + step, line + step
    return count
