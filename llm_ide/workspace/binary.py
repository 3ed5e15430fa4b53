"""A patch's files whose text is not UTF-8 (a Latin-1 source file): as text (the patch is stored as text) their
bytes would become U+FFFD and the patch would not apply to the base; git's binary patch keeps them, in ASCII."""

from __future__ import annotations

import codecs
import contextlib
import re
import shlex

from llm_ide.secrets import redact

GLOB = re.compile(r"[*?\[\\]")  # what a .gitignore or gitattributes pattern reads as a pattern, not a character
SECTION = re.compile(rb"^diff --git ", re.M)


def not_utf8(diff: bytes) -> list[str]:
    """The (UTF-8) paths of the diff's sections whose text is not UTF-8 (a Latin-1 source file's); one whose text
    holds a secret stays text, where it is masked."""
    found = []
    for section in SECTION.split(diff)[1:]:
        header = section.split(b"\n", 1)[0]  # `a/P b/P` (no renames), both C-quoted or neither: its first half
        first = header[: (len(header) - 1) // 2]
        try:
            section.decode("utf-8")
        except UnicodeDecodeError:
            with contextlib.suppress(UnicodeDecodeError):
                name = (codecs.escape_decode(first[1:-1])[0] if first[:1] == b'"' else first).decode("utf-8")
                if redact(lossy := section.decode("utf-8", errors="replace")) == lossy:
                    found.append(name.removeprefix("a/"))
    return found


def as_binary(git_dir: str, paths: list[str]) -> str:
    """Shell code marking `paths` binary in our git directory's info/attributes, for the diff after it."""
    attributes = "".join(f'"/{quoted(path)}" binary\n' for path in paths)
    return f"printf %s {shlex.quote(attributes)} > {shlex.quote(git_dir)}/info/attributes && "


def quoted(path: str) -> str:
    """A gitattributes pattern matching `path` alone (relative to the top), as the inside of a C-quoted string."""
    pattern = GLOB.sub(lambda found: "\\" + found.group(), path)
    return pattern.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
