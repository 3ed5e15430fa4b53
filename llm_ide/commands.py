"""What a shell command does, as far as can be told without running it: whether it only reads, which files it writes
whole, which file it shows whole."""

from __future__ import annotations

import re
from collections.abc import Collection

from llm_ide.actions import _segments
from llm_ide.sed import only_prints as prints

WRITES = (">", ">>", "tee", "-i", "--in-place")
READERS = ("cat", "ls", "grep", "head", "tail", "wc", "find", "nl", "sed", "git")
GIT_READERS = ("diff", "log", "show", "status", "grep", "blame")
WRITING = {"git": ("--output", "-O", "--open-files", "--ext"), "find": ("-delete", "-exec", "-ok", "-fprint", "-fls")}


def read_only(command: str, readers: Collection[str] = READERS, git_readers: Collection[str] = GIT_READERS) -> bool:
    """Every part of the command (lines too) is one of `readers` (sed that only prints, git with one of `git_readers`;
    no option that writes or runs a program); no redirection into a file, no substitution."""
    command = command.replace("2>&1", " ").replace(">&2", " ").replace("\n", ";")
    if any(mark in command for mark in (">", "$(", "`", "<(")) or not (segments := _segments(command)):
        return False
    for words in segments:
        tool = words[0].rsplit("/", 1)[-1]
        if tool not in readers or any(word in WRITES or word.startswith(WRITING.get(tool, ())) for word in words[1:]):
            return False
        if (tool == "git" and (len(words) < 2 or words[1] not in git_readers)) or (tool == "sed" and not prints(words)):
            return False
    return True


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
