"""What a prompt held when the model used it: the lines an edit replaced (and the ±3 lines around them), and the
references of a command (names, paths, numbers it took from earlier output). The definitions are in docs/replay.md.

Text matching is the same for every agent: a line counts as present when, its whitespace collapsed and stripped,
it occurs inside one line of the prompt (whitespace collapsed too), not glued to a name (`x = 1` is in
`445  x = 1` but not in `max = 10`); lines with fewer than MIN_CHARS non-space characters or no letter or digit are
no evidence and are not counted. A token is present when it occurs in the prompt with no letter, digit or `_` right
before or after it."""

from __future__ import annotations

import builtins
import difflib
import keyword
import re
from dataclasses import dataclass, field
from functools import cached_property

from llm_ide.commands import written_whole
from llm_ide.replay.formats import Message
from llm_ide.replay.tree import FileChange

MIN_CHARS = 4
CONTEXT = 3
WORKDIRS = ("/testbed/", "./")
TOKEN = re.compile(
    r"(?P<option>(?<![\w/.-])--?[A-Za-z][\w-]*)"
    r"|(?P<path>(?:\.{0,2}/)?[\w-]+(?:[/.][\w-]+)+/?)"
    r"|(?P<word>[A-Za-z_]\w*)"
    r"|(?P<number>\d+)"
)
PIECE = re.compile(r"[A-Za-z_]\w*|\d+")
SHELL_WORDS = frozenset(
    re.findall(
        r"\S+",
        """awk bash cat cd chmod cp cut diff do done echo elif else env esac exit export fi find for git grep head if
        in less ls mkdir mv nl pip python python3 pytest rm sed sh sort tail tee then touch tr true false uniq wc while
        xargs EOF dev null testbed""",
    )
)
STOP = SHELL_WORDS | frozenset(keyword.kwlist) | frozenset(dir(builtins)) | {"self", "cls"}


def collapse(text: str) -> str:
    return " ".join(text.split())


def evidence(line: str) -> str | None:
    """The line as matched (whitespace collapsed), or None when it is too short to be evidence."""
    text = collapse(line)
    if len(text.replace(" ", "")) < MIN_CHARS or not any(char.isalnum() for char in text):
        return None
    return text


def is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def occurs(needle: str, text: str) -> bool:
    """`needle` in `text`, not continuing a name on either side (where the needle itself starts or ends one)."""
    start = text.find(needle)
    while start != -1:
        end = start + len(needle)
        before = start == 0 or not is_word(text[start - 1]) or not is_word(needle[0])
        after = end == len(text) or not is_word(text[end]) or not is_word(needle[-1])
        if before and after:
            return True
        start = text.find(needle, start + 1)
    return False


@dataclass
class Text:
    """A prompt (or any text) ready for matching: its lines with whitespace collapsed."""

    raw: str

    @classmethod
    def of(cls, messages: list[Message]) -> Text:
        return cls("\n".join(message["content"] for message in messages))

    @cached_property
    def lines(self) -> str:
        return "\n".join(collapse(line) for line in self.raw.splitlines())

    def holds_line(self, line: str) -> bool:
        return occurs(line, self.lines)

    def holds_token(self, token: str) -> bool:
        return occurs(token, self.raw)


@dataclass(frozen=True)
class EditLines:
    """One command's edit: the pre-image lines (removed or replaced) and the unchanged lines within CONTEXT lines of
    its hunks, in the old file; only lines that are evidence."""

    removed: list[tuple[str, int, str]]  # (path, line number in the old file, text as matched)
    context: list[tuple[str, int, str]]


def rewritten(command: str, paths: list[str]) -> set[str]:
    """Those of `paths` that `command` wrote whole (from the model's memory: `cat > f <<EOF`, `tee f`, a file written
    so and moved onto it)."""
    written = {path_token(target) for target in written_whole(command)}
    return {path for path in paths if path in written}


def edit_lines(changes: list[FileChange], whole: set[str] | frozenset[str] = frozenset()) -> EditLines:
    """The edit's lines; a file in `whole` (written whole by the command) replaced every line it had."""
    removed: list[tuple[str, int, str]] = []
    context: list[tuple[str, int, str]] = []
    for change in changes:
        old, new = change.old.splitlines(), change.new.splitlines()
        gone, near = (set(range(len(old))), set()) if change.path in whole else hunk_lines(old, new)
        removed += [(change.path, i + 1, text) for i in sorted(gone) if (text := evidence(old[i])) is not None]
        context += [(change.path, i + 1, text) for i in sorted(near) if (text := evidence(old[i])) is not None]
    return EditLines(removed, context)


def hunk_lines(old: list[str], new: list[str]) -> tuple[set[int], set[int]]:
    """Indexes in `old` of the removed or replaced lines, and of the unchanged lines within CONTEXT of a hunk."""
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    matcher = difflib.SequenceMatcher(None, old[head : len(old) - tail], new[head : len(new) - tail], autojunk=False)
    gone: set[int] = set()
    near: set[int] = set()
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag == "equal":
            continue
        gone.update(range(head + i1, head + i2))
        near.update(range(max(0, head + i1 - CONTEXT), min(len(old), head + i2 + CONTEXT)))
    return gone, near - gone


def references(command: str, seen: list[Text], fixed: Text) -> list[str]:
    """The command's tokens (names of ≥3 characters, paths, numbers of ≥2 digits; no options, shell words, Python
    keywords or builtins) that occur in every text of `seen` (the earlier observations, as each run saw them) and
    not in `fixed` (the task and system text). A path-shaped token that no earlier output holds is looked at as
    its names and numbers instead."""
    found: dict[str, None] = {}

    def take(token: str) -> None:
        if token not in found and all(text.holds_token(token) for text in seen) and not fixed.holds_token(token):
            found[token] = None

    for match in TOKEN.finditer(command):
        kind, token = match.lastgroup, match.group()
        if kind == "path":
            path = path_token(token)
            if len(path) >= 3 and all(text.holds_token(path) for text in seen):
                take(path)
                continue
            for piece in PIECE.findall(token):
                if word_token(piece):
                    take(piece)
        elif kind in ("word", "number") and word_token(token):
            take(token)
    return list(found)


def path_token(token: str) -> str:
    for prefix in WORKDIRS:
        token = token.removeprefix(prefix)
    return token.rstrip("/.")


def word_token(token: str) -> bool:
    if token.isdigit():
        return len(token) >= 2
    return len(token) >= 3 and token not in STOP


@dataclass
class Counts:
    total: int = 0
    present: int = 0
    missing: list[str] = field(default_factory=list)

    def add(self, present: bool, label: str) -> None:
        self.total += 1
        self.present += present
        if not present:
            self.missing.append(label)


def grounding(edit: EditLines, prompt: Text) -> tuple[Counts, Counts]:
    """The edit's pre-image lines and context lines present in `prompt`; each miss labelled `path:line: text`."""
    removed, context = Counts(), Counts()
    for counts, lines in ((removed, edit.removed), (context, edit.context)):
        for path, number, line in lines:
            counts.add(prompt.holds_line(line), f"{path}:{number}: {line}")
    return removed, context


def recall(tokens: list[str], prompt: Text) -> Counts:
    counts = Counts()
    for token in tokens:
        counts.add(prompt.holds_token(token), token)
    return counts
