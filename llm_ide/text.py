"""Text every store can hold, whatever a model, a command or a file produced, and the pieces a reply's text is read
by: a tag's content, the first sentence of a paragraph."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from llm_ide.errors import FormatError

LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def clean_text(text: str) -> str:
    """Text every store can hold: no NUL (Postgres rejects it), no lone surrogate (not encodable as UTF-8)."""
    if "\0" in text:
        text = text.replace("\0", "\ufffd")
    return LONE_SURROGATE.sub("\ufffd", text)


def longest_first(values: Iterable[str]) -> list[str]:  # then in order: one list whatever order a set gives
    return sorted(values, key=lambda value: (-len(value), value))


def shared_start(first: Sequence[Any], second: Sequence[Any]) -> int:
    """How long a start two texts or lists share: a binary search over C-level comparisons of slices (a loop over
    the items, as `os.path.commonprefix` runs, costs milliseconds on a prompt)."""
    low, high = 0, min(len(first), len(second))
    while low < high:
        middle = (low + high + 1) // 2
        if first[low:middle] == second[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def first_sentence(text: str) -> str:
    """The first sentence of the first paragraph, on one line."""
    paragraph = text.strip().split("\n\n")[0]
    return " ".join(_SENTENCE_END.split(paragraph, maxsplit=1)[0].split())


def extract_tag(text: str, name: str, required: bool = True) -> str | None:
    """Content of <name>...</name>, lenient about whitespace, case, `-`/`_` and a missing or misspelt closing tag."""
    stem = "[-_ ]?".join(re.escape(part) for part in re.split(r"[-_]", name))
    opening = re.compile(rf"<\s*{stem}\s*>", re.IGNORECASE)
    match = opening.search(text)
    if match is None:
        if required:
            raise FormatError(f"missing <{name}> tag")
        return None
    rest = text[match.end() :]
    closing = re.compile(rf"<\s*/?\s*{stem}\s*>", re.IGNORECASE).search(rest)
    if closing is None:
        following = re.search(r"<\s*[a-z][\w-]*\s*>", rest, re.IGNORECASE)
        closing_at = following.start() if following else len(rest)
    else:
        closing_at = closing.start()
    return rest[:closing_at].strip()
