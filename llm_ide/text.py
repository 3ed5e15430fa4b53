"""Text every store can hold, whatever a model, a command or a file produced, and the pieces a reply's text is read
by: a tag's content, the first sentence of a paragraph."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import AnyStr

from llm_ide.errors import FormatError

LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
ROW = re.compile(r" *(\d+)\t")  # a numbered code row, as the code context, the view actions and `nl -ba` show them
SHARED_RUN = 3  # consecutive rows shown identically before: elided


def clean_text(text: str) -> str:
    """Text every store can hold: no NUL (Postgres rejects it), no lone surrogate (not encodable as UTF-8)."""
    if "\0" in text:
        text = text.replace("\0", "\ufffd")
    return LONE_SURROGATE.sub("\ufffd", text)


def shared_start(first: AnyStr, second: AnyStr) -> int:
    """The length of the start two texts share: a binary search over C-level comparisons of slices (a loop over
    the characters, as `os.path.commonprefix` runs, costs milliseconds on a prompt)."""
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


def numbered_rows(text: str) -> set[str]:
    """The numbered code rows of a text."""
    return {line for line in text.split("\n") if ROW.match(line)}


def rows_elided(text: str, shown: Collection[str], say: Callable[[str, str], str]) -> str:
    """The text with each run of at least SHARED_RUN numbered rows that `shown` holds replaced by `say(first, last)`
    (their first and last line numbers): one line for rows the prompt already shows as they are."""
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) >= SHARED_RUN:
            first, last = (ROW.match(row).group(1) for row in (run[0], run[-1]))  # type: ignore[union-attr]
            out.append(say(first, last))
        else:
            out.extend(run)
        run.clear()

    for line in text.split("\n"):
        if line in shown and ROW.match(line):
            run.append(line)
        else:
            flush()
            out.append(line)
    flush()
    return "\n".join(out)
