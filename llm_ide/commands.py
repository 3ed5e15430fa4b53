"""What a shell command does, as far as can be told without running it: whether it only reads."""

from __future__ import annotations

from collections.abc import Collection

from llm_ide.actions import _segments

WRITES = (">", ">>", "tee", "-i", "--in-place")
READERS = ("cat", "ls", "grep", "head", "tail", "wc", "find", "nl", "sed", "git")
GIT_READERS = ("diff", "log", "show", "status", "grep", "blame")


def read_only(command: str, readers: Collection[str] = READERS, git_readers: Collection[str] = GIT_READERS) -> bool:
    """Every part of the command is one of `readers` (sed without -i, git with one of `git_readers`); no redirection
    into a file."""
    command = command.replace("2>&1", " ").replace(">&2", " ")
    if ">" in command or "$(" in command or "`" in command:
        return False
    segments = _segments(command)
    if not segments:
        return False
    for words in segments:
        tool = words[0].rsplit("/", 1)[-1]
        if tool not in readers or any(word in WRITES for word in words[1:]):
            return False
        if tool == "git" and (len(words) < 2 or words[1] not in git_readers):
            return False
        if tool == "find" and any(word in {"-delete", "-exec", "-execdir", "-fprint"} for word in words):
            return False
    return True
