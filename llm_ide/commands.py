"""What a shell command does to files, as far as can be told without running it: which files it writes whole, which
file it shows whole (whether it only reads: `read_only`, llm_ide/actions.py)."""

from __future__ import annotations

import re

HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
WORD = r"(['\"]?)(?P<{name}>[^\s'\"<>|&;()]+)\{group}"
WHOLE_WRITES = (
    re.compile(r"(?<![<>&\d])>\|?\s*" + WORD.format(name="target", group=1)),  # `> f`, not `>> f`, `2> f`, `&> f`
    re.compile(r"\btee\s+(?!-a\b|--append\b)(?:-\S+\s+)*" + WORD.format(name="target", group=1)),
)
MOVE = re.compile(
    r"\b(?:mv|cp)\s+(?:-\S+\s+)*" + WORD.format(name="source", group=1) + r"\s+" + WORD.format(name="target", group=3)
)
WHOLE_READ = re.compile(r"\s*(?:cat(?:\s+-\w+)*|nl\s+-ba)\s+" + WORD.format(name="path", group=1) + r"\s*")


def shell_text(command: str) -> str:
    """The command without the bodies of its here-documents (what the shell reads as commands)."""
    kept: list[str] = []
    ends: list[str] = []
    for line in command.split("\n"):
        if ends:
            if line.strip() == ends[0]:
                ends.pop(0)
            continue
        kept.append(line)
        ends += [match.group(2) for match in HEREDOC.finditer(line)]
    return "\n".join(kept)


def written_whole(command: str) -> set[str]:
    """The files (as the command names them) it writes whole: redirected into (`cat > f <<EOF`, `tee f`), or written
    so and then moved or copied onto (`cat > f.new <<EOF && mv f.new f`)."""
    shell = shell_text(command)
    written = {match.group("target") for pattern in WHOLE_WRITES for match in pattern.finditer(shell)}
    for match in MOVE.finditer(shell):
        if match.group("source") in written:
            written.add(match.group("target"))
    return written


def read_whole(command: str) -> str | None:
    """The file the command shows whole and alone (`cat f`, `nl -ba f`), as it names it."""
    match = WHOLE_READ.fullmatch(command)
    return match.group("path") if match else None
