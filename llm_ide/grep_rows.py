"""The rows of `grep -rnHZ` (the `search` action's): each hit's path, read whole even when it holds a newline, and
the path as a row shows it (a name with a control character in bash's `$'…'` quoting, which a command can take)."""

from __future__ import annotations

import re

HIT_REST = re.compile(r"\d+:")


def grep_hits(output: str) -> list[tuple[str, str]]:
    """(path, `line:text`) per hit; a row with no NUL continues the path of the next hit (grep's own messages, which
    start with `grep: `, aside)."""
    hits: list[tuple[str, str]] = []
    pending: list[str] = []
    for row in output.split("\n"):
        path, null, rest = row.partition("\x00")
        if null and HIT_REST.match(rest):
            hits.append(("\n".join([*pending, path]).removeprefix("./"), rest))
        pending = [*pending, row] if not null and not row.startswith("grep: ") else []
    return hits


def shown_path(path: str) -> str:
    if path.isprintable():
        return path
    return "$'" + path.encode("unicode_escape").decode("ascii").replace("'", "\\'") + "'"
