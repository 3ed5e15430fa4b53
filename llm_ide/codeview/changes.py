"""The lines an operation changed, whatever made the change (`edit`, `sed -i`, a Python script, `patch`, a heredoc):
read from the run's worktree snapshots before and after it (each a diff of the worktree against the base commit), so
no file is read and no command is run for it. Each snapshot section is turned into a sequence of tokens over the base
lines its hunks span (an int: a base line kept; a str: a line the worktree has instead), and the two sequences are
compared: what the later one holds that the earlier lacks are the changed lines, numbered as the file has them now."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from functools import lru_cache
from typing import TYPE_CHECKING

from llm_ide.text import shared_start

if TYPE_CHECKING:
    from llm_ide.codeview.view import CodeView
    from llm_ide.state.context import Scope

HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
INDEX = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+.*\n", re.M)
BINARY = "\nGIT binary patch"  # a section of `git diff --binary` (workspace/binary.py)
MARGIN = 3  # lines around a change that count as accessed with it


@dataclass(frozen=True)
class Hunk:
    start: int  # first base line it spans (for a pure insertion: the line it goes before)
    end: int  # last base line it spans (start - 1 for a pure insertion)
    body: tuple[str, ...]


@dataclass(frozen=True)
class Section:
    hunks: tuple[Hunk, ...]
    created: bool  # the base has no such file
    deleted: bool  # the worktree has no such file


BASE = Section((), created=False, deleted=False)  # a file as the base has it
GONE = Section((), created=True, deleted=True)  # a file neither the base nor the worktree has


def sections(patch: str) -> dict[str, str]:
    """Path → its section of a `git diff` (the text after its `diff --git `, up to the next one)."""
    return {_target(part): part.rstrip("\n") for part in ("\n" + patch).split("\ndiff --git ")[1:]}


def _target(section: str) -> str:
    """The file a section is about: its `+++ b/…` line, `--- a/…` for a deleted file, else the header's `a/P b/P`."""
    header, *rest = section.split("\n", 6)
    removed = None
    for line in rest:
        if line.startswith("+++ b/"):
            return line[6:].rstrip("\t")
        if line.startswith("--- a/"):
            removed = line[6:].rstrip("\t")
    return removed or header[2 : 2 + (len(header) - 5) // 2]


@lru_cache(maxsize=2)
def tracked_diff(patch: str) -> str:
    """The patch's sections of files the base has (the files the agent created left out), without `index` lines; a
    binary one (a file that is not UTF-8) as its header alone: its base85 lines say nothing a model can read (kept for
    the last two patches: most steps change none)."""
    kept = [_header(text) if BINARY in text else text for text in sections(patch).values() if not _created(text)]
    return "\n".join(INDEX.sub("", "diff --git " + text, count=1) for text in kept)


def _header(section: str) -> str:
    return section.split(BINARY, 1)[0] + BINARY


def _created(section: str) -> bool:
    head = "\n".join(section.split("\n", 6)[:6])
    return "\nnew file mode" in head or "\n--- /dev/null" in head


def parse(section: str) -> Section:
    hunks: list[Hunk] = []
    lines = section.split("\n")
    at = 0
    while at < len(lines):
        match = HUNK.match(lines[at])
        at += 1
        if not match:
            continue
        start, length = int(match[1]), int(match[2] if match[2] is not None else 1)
        body = []
        while at < len(lines) and lines[at][:1] in {" ", "+", "-", "\\"}:
            if lines[at][:1] != "\\":
                body.append(lines[at])
            at += 1
        first = start if length else start + 1
        hunks.append(Hunk(first, first + length - 1, tuple(body)))
    head = "\n".join(lines[:6])
    return Section(tuple(hunks), _created(section), "\n+++ /dev/null" in head)


def _tokens(hunks: tuple[Hunk, ...], low: int, high: int) -> list[int | str]:
    """The worktree's lines over base lines `low..high`: a base line kept is its number, another line its text."""
    out: list[int | str] = []
    line = low
    for hunk in hunks:
        out.extend(range(line, hunk.start))
        line = hunk.start
        for row in hunk.body:
            if row[0] == " ":
                out.append(line)
                line += 1
            elif row[0] == "-":
                line += 1
            else:
                out.append(row[1:])
    out.extend(range(line, high + 1))
    return out


def changed_lines(before: str, after: str) -> dict[str, tuple[set[int], bool]]:
    """Path → (the lines of it that changed from snapshot `before` to `after`, numbered as in `after`; where lines
    were only removed, the two lines around the gap), and whether the base lacks the file (the agent created it).
    Files that `after` has deleted are left out."""
    old, new = sections(before), sections(after)
    changed: dict[str, tuple[set[int], bool]] = {}
    for path in sorted(old.keys() | new.keys()):
        if old.get(path) == new.get(path):
            continue
        was = parse(old[path]) if path in old else None
        now = parse(new[path]) if path in new else None
        if now is None and was is not None and was.created:
            continue  # a file the agent had created is gone
        now = now or BASE
        was = was or (GONE if now.created else BASE)
        if now.deleted or not (spans := (*was.hunks, *now.hunks)):
            continue
        low, high = min(hunk.start for hunk in spans), max(hunk.end for hunk in spans)
        lines = _differences([] if was.deleted else _tokens(was.hunks, low, high), _tokens(now.hunks, low, high))
        changed[path] = ({low + index for index in lines if low + index >= 1}, now.created)
    return changed


def _differences(previous: list[int | str], current: list[int | str]) -> set[int]:
    """Indices into `current` of what is not in `previous`, and both neighbours of what was only removed."""
    head = shared_start(previous, current)
    tail = shared_start(previous[head:][::-1], current[head:][::-1])
    found: set[int] = set()
    matcher = SequenceMatcher(None, previous[head : len(previous) - tail], current[head : len(current) - tail], False)
    for tag, _, _, first, last in matcher.get_opcodes():
        if tag in {"replace", "insert"}:
            found.update(range(head + first, head + last))
        elif tag == "delete":
            found.update((head + first - 1, head + first))
    return found


def edited_scopes(view: CodeView, before: str, after: str) -> list[Scope]:
    """The changed lines and `MARGIN` lines around each as accessed scopes; those of files the agent created are
    marked `created`."""
    scopes: list[Scope] = []
    for path, (lines, created) in sorted(changed_lines(before, after).items()):
        around = {near for line in lines for near in range(line - MARGIN, line + MARGIN + 1)}
        found = view.scopes(path, around)
        scopes += [replace(scope, created=True) for scope in found] if created else found
    return scopes
