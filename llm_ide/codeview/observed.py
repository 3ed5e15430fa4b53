"""The lines of the repository's files that a command's output showed, recognised from the output itself and each
checked against the file as it is now: numbered rows (`nl -ba`, `cat -n`: `N<TAB>text` is line N), grep rows
(`path:N:text`, `N:text`, context rows with `-`), a traceback's `File "path", line N` and the code line under it, diff
hunks (their post-image lines), and runs of plain output lines equal to consecutive lines of a file that the command or
the output names (`cat`, `sed -n`, `head`, `tail`, `awk`, a Python snippet printing source; pytest's source listings,
indented by four columns)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llm_ide.codeview.view import CodeView
    from llm_ide.state.context import Scope

NUMBERED = re.compile(r" *(\d+)\t(.*)")
GREP_ROW = re.compile(r"(?P<path>[^\s:]+?)(?P<sep>[:-])(?P<line>\d+)(?P=sep)(?P<text>.*)")
BARE_ROW = re.compile(r"(?P<line>\d+)[:-](?P<text>.*)")
TRACEBACK = re.compile(r'\s*File "(?P<path>[^"]+)", line (?P<line>\d+)')
FILE_ROW = re.compile(r"(?P<path>(?:[\w.@+-]+/)*[\w@+-][\w.@+-]*\.[A-Za-z]\w*):(?P<text>.*)")  # grep without -n
DIFF_TARGET = re.compile(r"\+\+\+ (?:b/)?(?P<path>[^\t]+)")
HUNK = re.compile(r"@@ -\d+(?:,\d+)? \+(?P<line>\d+)(?:,\d+)? @@")
PATH_WORD = re.compile(r"(?<![\w.@+/-])(?:[\w.@+-]+/)*[\w@+-][\w.@+-]*\.[A-Za-z]\w*(?![\w/])")
BARE_WORD = re.compile(r"(?<![^\s;|&(])[\w@+][\w./@+-]*(?=$|[\s;|&)])")  # `cat Makefile`: words of the first line
IMPORTS = re.compile(r"\b(?:from|import|-m)\s+([\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*)")
FROM_IMPORT = re.compile(r"\bfrom\s+([\w.]+)\s+import\s+\(?\s*(\w+(?:\s+as\s+\w+)?(?:\s*,\s*\w+(?:\s+as\s+\w+)?)*)")
MODULE = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\s+as\s+\w+)?")
LISTED = ("    ", ">   ")  # pytest prints source lines under four columns, `>` marking the failing one
MAX_MENTIONS = 24
MAX_STARTS = 16  # alignments tried for one output line (a line repeated more often anchors nothing)
MIN_CHARS = 10  # non-blank characters a run (or a lone line) needs to count as shown code
MAX_SCOPES = 40  # pieces of code one output records at most (`grep -n 'def '` lists every function of a file)

Loaded = dict[str, tuple[str, list[str]]]  # raw path as mentioned → (repo path, the file's lines now)
Load = Callable[[list[str]], Loaded]


def observed_scopes(view: CodeView, command: str, output: str) -> list[Scope]:
    """The code `output` (of `command`) showed, as accessed scopes; the files it mentions are read in one call."""

    def load(raws: list[str]) -> Loaded:
        paths = {raw: path for raw in raws if (path := view.path(raw)) and not path.startswith(("../", "/", ".."))}
        view.refresh(set(paths.values()))
        return {raw: (path, lines) for raw, path in paths.items() if (lines := view.lines(path)) is not None}

    shown = shown_lines(command, output, load)
    return [scope for path, lines in shown.items() for scope in view.scopes(path, lines, fresh=False)][:MAX_SCOPES]


def shown_lines(command: str, output: str, load: Load) -> dict[str, set[int]]:
    """Repo path → the lines of it that `output` shows. `load` reads the files mentioned (raw paths, as the command
    and the output write them) in one call and gives those that exist inside the repository."""
    rows = output.split("\n")
    mentioned = _command_paths(command)
    files = load(_mentions(mentioned, rows))
    texts = {path: lines for path, lines in files.values()}
    named = list(dict.fromkeys(files[raw][0] for raw in mentioned if raw in files))
    shown: dict[str, set[int]] = {}
    plain = _structured(rows, files, [(path, texts[path]) for path in named], shown)
    listed = [_unlisted(row) for row in plain] if any(row and row.startswith(LISTED[1]) for row in plain) else []
    wanted = {row for row in (*plain, *listed) if row}
    for path, lines in texts.items():
        found = _runs(plain, lines, wanted, lone=True) | (_runs(listed, lines, wanted) if listed else set())
        if found:
            shown.setdefault(path, set()).update(found)
    return shown


def paths_named(texts: list[str], workdir: str) -> list[str]:
    """Path-like words of the texts (commands, outputs), in first-seen order; `workdir/a.py` as `a.py`."""
    prefix = workdir.rstrip("/") + "/"
    return list(dict.fromkeys(path for text in texts for path in PATH_WORD.findall(text.replace(prefix, " "))))


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


def _mentions(named: list[str], rows: list[str]) -> list[str]:
    found = dict.fromkeys(named)
    for row in rows:
        if ":" not in row and '"' not in row and "-" not in row and "+++ " not in row:
            continue
        match = GREP_ROW.match(row) or TRACEBACK.match(row) or DIFF_TARGET.match(row) or FILE_ROW.match(row)
        if match and len(found) < 2 * MAX_MENTIONS:
            found.setdefault(match["path"])
    return list(found)


def _structured(
    rows: list[str], files: Loaded, named: list[tuple[str, list[str]]], shown: dict[str, set[int]]
) -> list[str | None]:
    """Record the rows that say which line they are (numbered, grep, traceback, diff); the others are returned as
    they are for the run matching (None where a recorded row breaks a run)."""
    plain: list[str | None] = []
    diff: tuple[str, list[str]] | None = None
    post = 0  # the post-image line number of the next hunk row
    current = named[0] if named else None  # the file the bare numbered rows come from
    traceback: tuple[str, list[str], int] | None = None
    for row in rows:
        if row.startswith("diff --git ") or row.startswith("+++ "):
            diff = files.get(m["path"]) if (m := DIFF_TARGET.match(row)) else None
            post = 0
            plain.append(None)
            continue
        if diff is not None and (m := HUNK.match(row)):
            post = int(m["line"])
            plain.append(None)
            continue
        if diff is not None and post and row[:1] in {" ", "+", "-", "\\"}:
            if row[0] in " +":
                if _is(diff[1], post, row[1:]):
                    shown.setdefault(diff[0], set()).add(post)
                    plain.append(None)
                else:
                    plain.append(row[1:])
                post += 1
            else:
                plain.append(None)
            continue
        post = 0
        if traceback is not None:
            path, lines, number = traceback
            traceback = None
            if 1 <= number <= len(lines) and row.strip() and row.strip() == lines[number - 1].strip():
                shown.setdefault(path, set()).add(number)
                plain.append(None)
                continue
        if ":" not in row and "\t" not in row and "-" not in row and '"' not in row:
            plain.append(row)  # (none of the patterns below can match: most rows of a long listing)
            continue
        if m := TRACEBACK.match(row):
            if m["path"] in files:
                traceback = (*files[m["path"]], int(m["line"]))
            plain.append(None)
            continue
        if (m := NUMBERED.fullmatch(row)) or (m := BARE_ROW.fullmatch(row) if named else None):
            number, text = int(m[1]), m[2]
            hit = next((f for f in _preferring(current, named) if _is(f[1], number, text)), None)
            if hit is not None:
                current = hit
                shown.setdefault(hit[0], set()).add(number)
                plain.append(None)
            else:
                plain.append(text if m.re is NUMBERED else row)
            continue
        if (m := GREP_ROW.fullmatch(row)) and m["path"] in files:
            path, lines = files[m["path"]]
            if _is(lines, int(m["line"]), m["text"]):
                shown.setdefault(path, set()).add(int(m["line"]))
                plain.append(None)
                continue
        m = FILE_ROW.fullmatch(row)
        plain.append(m["text"] if m and m["path"] in files else row)
    return plain


def _preferring(
    current: tuple[str, list[str]] | None, named: list[tuple[str, list[str]]]
) -> Iterator[tuple[str, list[str]]]:
    if current is not None:
        yield current
    yield from (file for file in named if file is not current)


def _is(lines: list[str], number: int, text: str) -> bool:
    return 1 <= number <= len(lines) and lines[number - 1] == text


def _unlisted(row: str | None) -> str | None:
    return row[4:] if row is not None and row.startswith(LISTED) and len(row) > 4 else None


def _weight(texts: list[str | None]) -> int:
    return sum(len(text.strip()) for text in texts if text)


def _runs(plain: list[str | None], lines: list[str], wanted: set[str], lone: bool = False) -> set[int]:
    """Lines of the file shown by runs of consecutive output rows equal to consecutive lines of it (ties between
    alignments go to the one nearest after the previous run: files are read forwards). `lone`: a single row counts too
    when every occurrence of it in the file is shown (grep without line numbers)."""
    where: dict[str, list[int]] = {}
    for number, text in enumerate(lines):
        if text in wanted and len(text) > 2 and not text.isspace():
            where.setdefault(text, []).append(number)
    if not where:
        return set()
    found: set[int] = set()
    singles: dict[str, int] = {}
    floor, last, at, total, count = 0, 0, 0, len(plain), len(lines)
    while at < total:
        starts = where.get(plain[at] or "")
        if not starts or len(starts) > MAX_STARTS:
            at += 1
            continue
        best, first = 0, -1
        for start in starts:
            length = 0
            while at + length < total and start + length < count and plain[at + length] == lines[start + length]:
                length += 1
            if length > best or (length == best and first < last <= start):
                best, first = length, start
        back = 0
        while at - back > floor and first - back > 0 and plain[at - back - 1] == lines[first - back - 1]:
            back += 1
        weight = _weight(plain[at - back : at + best])
        if best + back >= 2 and weight >= MIN_CHARS:
            found.update(range(first - back + 1, first + best + 1))
            floor, last = at + best, first + best
        elif lone and best + back == 1 and weight >= MIN_CHARS:
            singles[plain[at] or ""] = singles.get(plain[at] or "", 0) + 1
        at += best
    for text, seen in singles.items():
        if seen >= len(where[text]):
            found.update(number + 1 for number in where[text])
    return found
