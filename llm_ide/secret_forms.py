"""What masking a set of secrets looks for, made once per set (secrets.py's `redact` keeps the last few): each
secret's forms (as is, reversed, rot13'd, URL-encoded, hex and base64 at any alignment) and one pattern that finds
them all, the encoded ones wrapped over lines or not."""

from __future__ import annotations

import base64
import codecs
import re
from functools import lru_cache
from urllib.parse import quote, quote_plus

from llm_ide.credentials import MIN_SECRET_LENGTH
from llm_ide.text import longest_first


def base64_forms(raw: bytes) -> set[str]:
    """The base64 text that encodes `raw` wherever it starts in a longer stream (three alignments, both alphabets)."""
    forms = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        start, end = (8 * offset + 5) // 6, (8 * (offset + len(raw))) // 6
        piece = encoded[start:end]
        forms |= {piece, piece.replace("+", "-").replace("/", "_")}
    return forms


def forms(secret: str) -> tuple[set[str], set[str]]:
    """(forms matched as they are, encoded forms that may also be wrapped over lines)."""
    raw = secret.encode("utf-8")
    plain = {secret, secret[::-1], codecs.encode(secret, "rot13"), quote(secret, safe=""), quote_plus(secret, safe="")}
    encoded = {raw.hex(), raw.hex().upper(), *base64_forms(raw)}
    return plain, {form for form in encoded if len(form) >= MIN_SECRET_LENGTH}


@lru_cache(maxsize=64)
def compiled(secrets: tuple[str, ...]) -> tuple[list[str], list[str], re.Pattern[str] | None]:
    """The plain forms, the encoded forms, and the pattern finding any of them (None: no form at all)."""
    plain, wrapped = set[str](), set[str]()
    for secret in secrets:
        found, encoded = forms(secret)
        plain |= found
        wrapped |= encoded
    alternatives = [re.escape(form) for form in longest_first(plain)]
    alternatives += [r"(?:\r?\n)?".join(map(re.escape, form)) for form in longest_first(wrapped)]
    pattern = re.compile("|".join(alternatives)) if alternatives else None
    return sorted(plain), sorted(wrapped), pattern
