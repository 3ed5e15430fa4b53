"""Text every store can hold, whatever a model, a command or a file produced."""

from __future__ import annotations

import re

LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """Text every store can hold: no NUL (Postgres rejects it), no lone surrogate (not encodable as UTF-8)."""
    if "\0" in text:
        text = text.replace("\0", "\ufffd")
    return LONE_SURROGATE.sub("\ufffd", text)
