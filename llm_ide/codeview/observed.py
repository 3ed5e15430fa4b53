"""The lines of the repository's files a command's output showed, from the output, checked against the files as they
are: rows that say their line (`nl -ba`, `grep -n`, `path:N:text`, a traceback's frames, diff hunks), then runs of rows
equal to consecutive lines of a file, in the files named, then those the code view read last. By content: each output
row (its line-number prefix, if any, taken off) is looked up in the file's index of stripped lines (codeview/reads.py:
`LineKeys`), and runs of consecutive rows equal to consecutive lines of the file (indentation shifted alike on every
row: pytest's listings, a dedented snippet) are the lines shown; a row that says its line number counts alone when the
file has that text there."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from llm_ide.codeview.reads import LineKeys

if TYPE_CHECKING:
    from llm_ide.codeview.view import CodeView
    from llm_ide.state.context import Scope

GREP_ROW = re.compile(r"(?P<path>[^\s:]+?)(?P<sep>[:-])(?P<line>\d{1,9})(?P=sep)(?P<text>.*)")
TRACEBACK = re.compile(r'\s*File "(?P<path>[^"]+)", line (?P<line>\d{1,9})')
FILE_ROW = re.compile(r"(?P<path>(?:[\w.@+-]+/)*[\w@+-][\w.@+-]*\.[A-Za-z]\w*):(?P<text>.*)")  # grep without -n
DIFF_TARGET = re.compile(r"\+\+\+ (?:b/)?(?P<path>[^\t]+)")
HUNK = re.compile(r"@@ -\d+(?:,\d+)? \+(?P<line>\d{1,9})(?:,\d+)? @@")
PATH_WORD = re.compile(r"(?<![\w.@+/-])(?:[\w.@+-]+/)*[\w@+-][\w.@+-]*\.[A-Za-z]\w*(?![\w/])")
BARE_WORD = re.compile(r"(?<![^\s;|&(])[\w@+][\w./@+-]*(?=$|[\s;|&)])")  # `cat Makefile`: words of the first line
IMPORTS = re.compile(r"\b(?:from|import|-m)\s+([\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*)")
FROM_IMPORT = re.compile(r"\bfrom\s+([\w.]+)\s+import\s+\(?\s*(\w+(?:\s+as\s+\w+)?(?:\s*,\s*\w+(?:\s+as\s+\w+)?)*)")
MODULE = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\s+as\s+\w+)?")
IMPORT_ROW = re.compile(r"\s*(?:from\s+[\w.]+\s+)?import\s")
MAX_MENTIONS = 24
MAX_KNOWN = 8  # files the code view read last, tried after the named ones
MAX_SCOPES = 40  # pieces of code one output records at most (`grep -n 'def '` lists every function of a file)
MAX_STARTS = 16  # alignments tried for one output row (a line repeated more often anchors nothing)
MIN_CHARS = 10  # non-blank characters a run (or a lone row) needs to count as shown code
UNNAMED = (3, 40)  # non-blank rows and characters a run needs in a file neither the command nor the output names
NUMBER_PREFIX = re.compile(r"\s*(\d{1,9})(?:\t| *[|│:] ?| +|-)(.*)")  # `  12\t`, `12:`, `12-` (grep), ` 12 | `, `12  `
MARKER = re.compile(r"[>+](?=[ \t])")  # pytest's `>` on the failing line, a diff's `+`: one column of indentation


@dataclass(frozen=True)
class Row:
    """An output row as matched: its text stripped, its indentation, and the line number its prefix claims."""

    text: str
    indent: int
    number: int | None = None


File = tuple[str, LineKeys]  # (repo path, its lines' index)
Loaded = dict[str, File]  # raw path as mentioned → the file
Load = Callable[[list[str]], Loaded]


def observed_scopes(view: CodeView, command: str, output: str) -> list[Scope]:
    """The code `output` (of `command`) showed, as accessed scopes; the files it mentions are read in one call."""

    def load(raws: list[str]) -> Loaded:
        paths = {raw: path for raw in raws if (path := view.path(raw)) and not path.startswith(("../", "/", ".."))}
        view.refresh(set(paths.values()))
        return {raw: (path, keys) for raw, path in paths.items() if (keys := view.line_keys(path)) is not None}

    shown = shown_lines(command, output, load, view.recent(MAX_KNOWN))
    return [scope for path, lines in shown.items() for scope in view.scopes(path, lines, fresh=False)][:MAX_SCOPES]


def shown_lines(command: str, output: str, load: Load, known: list[str] | tuple[str, ...] = ()) -> dict[str, set[int]]:
    """Repo path → the lines of it that `output` shows. `load` reads the files mentioned (raw paths, as the command
    and the output write them; `known` ones too) in one call and gives those that exist inside the repository."""
    rows = output.split("\n")
    mentioned = _command_paths(command)
    mentions, framed = _mentions(mentioned, rows)
    files = load([*mentions, *known])
    texts = dict(files.values())
    named = list(dict.fromkeys(files[raw][0] for raw in mentioned if raw in files))
    order = [*((path, texts[path]) for path in named), *((p, k) for p, k in texts.items() if p not in named)]
    shown: dict[str, set[int]] = {}
    plain = _structured(rows, files, order, shown)
    about = {files[raw][0] for raw in mentions if raw in files}
    lone = {files[raw][0] for raw in mentions if raw in files and raw not in framed}  # a traceback's: no lone rows
    claimed: set[int] = set()
    for path, keys in order:
        if path not in about:  # a file only known: the rows no named file has, if enough are left
            plain = [None if at in claimed else row for at, row in enumerate(plain)]
            if sum(row is not None and bool(row.text) for row in plain) < UNNAMED[0]:
                break
        if found := runs(plain, keys, named=path in about, claimed=claimed, lone=path in lone):
            shown.setdefault(path, set()).update(found)
    return shown


def paths_named(texts: list[str], workdir: str) -> list[str]:
    """Path-like words of the texts (commands, outputs), in first-seen order; `workdir/a.py` as `a.py`."""
    prefix = workdir.rstrip("/") + "/"
    return list(dict.fromkeys(path for text in texts for path in _paths_in(text, prefix)))


@lru_cache(maxsize=4096)
def _paths_in(text: str, prefix: str) -> tuple[str, ...]:
    """One text's path-like words, each once (memoised: every step asks again about the same earlier outputs)."""
    return tuple(dict.fromkeys(PATH_WORD.findall(text.replace(prefix, " "))))


def _command_paths(command: str) -> list[str]:
    """Files the command names: path-like words, the modules a Python snippet imports or runs (`a.b` as `a/b.py`,
    `a/b/__init__.py`, also under `src/`), then the other words of its first line (`cat Makefile`)."""
    paths = PATH_WORD.findall(command)
    if "python" in command or "import " in command:
        modules = [
            f"{package}.{name}" for package, names in FROM_IMPORT.findall(command) for name in MODULE.findall(names)
        ]
        modules += [name for names in IMPORTS.findall(command) for name in MODULE.findall(names)]
        for base in (module.replace(".", "/") for module in modules):
            paths += [f"{root}{base}{tail}" for root in ("", "src/") for tail in (".py", "/__init__.py")]
    paths += BARE_WORD.findall(command.split("\n", 1)[0])
    return list(dict.fromkeys(paths))[:MAX_MENTIONS]


def _mentions(named: list[str], rows: list[str]) -> tuple[list[str], set[str]]:
    """The raw paths the command and the output's rows name, and those only a traceback's frames name."""
    framed_only = dict.fromkeys(named, False)
    for row in rows:
        if ":" not in row and '"' not in row and "-" not in row and "+++ " not in row:
            continue
        match = GREP_ROW.match(row) or TRACEBACK.match(row) or DIFF_TARGET.match(row) or FILE_ROW.match(row)
        if match and len(framed_only) < 2 * MAX_MENTIONS:
            path = match["path"]
            framed_only[path] = framed_only.get(path, True) and match.re is TRACEBACK
    return list(framed_only), {raw for raw, only in framed_only.items() if only}


def _structured(rows: list[str], files: Loaded, order: list[File], shown: dict[str, set[int]]) -> list[Row | None]:
    """Record the rows that say which line they are (numbered, grep, traceback, diff); the others are returned for
    the run matching (None where a recorded row or a header breaks a run)."""
    reader = _Reader(files, order, shown)
    return [reader.read(row) for row in rows]


class _Reader:
    def __init__(self, files: Loaded, order: list[File], shown: dict[str, set[int]]) -> None:
        self.files, self.order, self.shown = files, order, shown
        self.diff: File | None = None
        self.post = 0  # the post-image line number of the next hunk row
        self.current: File | None = order[0] if order else None  # the file the bare numbered rows come from
        self.traceback: tuple[str, LineKeys, int] | None = None

    def mark(self, path: str, number: int) -> None:
        self.shown.setdefault(path, set()).add(number)

    def read(self, row: str) -> Row | None:
        if row.startswith(("diff --git ", "+++ ")):
            self.diff = self.files.get(m["path"]) if (m := DIFF_TARGET.match(row)) else None
            self.post = 0
            return None
        if self.diff is not None and (m := HUNK.match(row)):
            self.post = int(m["line"])
            return None
        if self.diff is not None and self.post and row[:1] in {" ", "+", "-", "\\"}:
            return self.hunk_row(row)
        self.post = 0
        if self.traceback is not None and self.traceback_code(row):
            return None
        if not any(char in row for char in ':\t-"') and not row.lstrip()[:1].isdigit():
            return plain_row(row)  # (none of the patterns below can match: most rows of a long listing)
        if m := TRACEBACK.match(row):
            if m["path"] in self.files:
                path, keys = self.files[m["path"]]
                self.traceback = (path, keys, int(m["line"]))
            return None
        if (numbered := numbered_row(row)) is not None:
            if self.numbered(numbered, blank="\t" in row):
                return None
            if "\t" in row:
                return Row(numbered.text, numbered.indent)
        if (m := GREP_ROW.fullmatch(row)) and m["path"] in self.files:
            path, keys = self.files[m["path"]]
            if keys.has(int(m["line"]), m["text"]):
                self.mark(path, int(m["line"]))
                return None
            self.traceback = (path, keys, int(m["line"]))  # a warning's `path:N: message`: line N may come next
        m = FILE_ROW.fullmatch(row)
        return plain_row(m["text"] if m and m["path"] in self.files else row)

    def hunk_row(self, row: str) -> Row | None:
        if row[0] not in " +" or self.diff is None:
            return None
        path, keys = self.diff
        number, self.post = self.post, self.post + 1
        if keys.has(number, row[1:]):
            self.mark(path, number)
            return None
        return plain_row(" " + row[1:])

    def traceback_code(self, row: str) -> bool:
        assert self.traceback is not None
        path, keys, number = self.traceback
        self.traceback = None
        if row.strip() and keys.has(number, row):
            if not IMPORT_ROW.match(row):  # a frame of an import chain says where the import went: not code read
                self.mark(path, number)
            return True
        return False

    def numbered(self, row: Row, blank: bool) -> bool:
        """Whether a file (the one the previous numbered row came from first) has the row's text at its number."""
        if row.number is None or not (row.text or blank):
            return False
        for file in self.preferring():
            if file[1].has(row.number, row.text):
                self.current = file
                self.mark(file[0], row.number)
                return True
        return False

    def preferring(self) -> Iterator[File]:
        if self.current is not None:
            yield self.current
        yield from (file for file in self.order if file is not self.current)


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
