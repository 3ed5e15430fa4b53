"""Text on its way to the user's terminal: without the control sequences a command's output (or a model) may hold."""

from __future__ import annotations

import re

# CSI (ESC [ … final), OSC / DCS / SOS / PM / APC strings (up to BEL or ST), other two-byte ESC sequences, the 8-bit
# C1 controls, and every C0 control except newline and tab.
CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[ -/]*[0-~]?"
    r"|[\x80-\x9f]"
    r"|[\x00-\x08\x0b-\x1f\x7f]"
)
# The bidirectional embeddings, overrides and isolates, which reorder what follows them on screen (Trojan Source).
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """`text` as plain characters: escape sequences and control characters (but newlines and tabs) removed, the
    bidirectional controls shown as `<U+202E>`. (Each of those is a non-printable character: a text with none but
    newlines and tabs is returned as it is, found in a fifth of the time of the substitutions.)"""
    if text.replace("\n", "").replace("\t", "").isprintable():
        return text
    return BIDI.sub(lambda match: f"<U+{ord(match[0]):04X}>", CONTROL.sub("", text))


def plural(count: int, noun: str) -> str:
    """`1 call`, `2 calls`, `0 calls`."""
    return f"{count} {noun}{'s' * (count != 1)}"
