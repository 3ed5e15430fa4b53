"""The one secrets filter: the secrets known (the environment's, found by credentials.py's rules once per change of
the environment, not at every output; the settings' and those given in code) masked in every output (observations,
model requests and replies, logs, trajectories, preds). Masking covers the value as is, reversed, rot13'd,
URL-encoded, hex and base64 (at any alignment, wrapped over lines or not), for values of `MIN_SECRET_LENGTH`
characters or more."""

from __future__ import annotations

import base64
import codecs
import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import quote, quote_plus

from llm_ide.credentials import MASK, MIN_SECRET_LENGTH, credentials_in, is_secret_name, maskable

_registered: set[str] = set()
_lock = threading.Lock()


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The secrets of the environment (long enough to be told apart from ordinary words), longest first: the values
    of its secret variables, and the credentials any value holds (with the whole value that holds them)."""
    values = set()
    for key, value in (os.environ if environ is None else environ).items():
        found = credentials_in(value)
        if found or is_secret_name(key):
            values |= {value, *found}
    return longest_first(value for value in values if maskable(value))


_environment: tuple[dict[Any, Any], tuple[str, ...]] = ({}, ())


def environment_secrets() -> tuple[str, ...]:
    """`secret_values()` of this process's environment, found again only when the environment has changed (comparing
    it with the copy kept is a C-level dict comparison, not a scan of every variable)."""
    global _environment
    current = getattr(os.environ, "_data", None) or os.environ
    kept, values = _environment
    if current != kept:  # copied only when it changed
        values = tuple(secret_values())
        _environment = (dict(current), values)
    return values


def longest_first(values: Iterable[str]) -> list[str]:  # then in order: one list whatever order a set gives
    return sorted(values, key=lambda value: (-len(value), value))


def known_secrets(*extra: str | None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The secrets of the environment, the loaded settings and `extra` (an API key given in code), longest first."""
    found = secret_values(environ) if environ is not None else environment_secrets()
    return longest_first({*found, *registered(), *(value for value in extra if value and maskable(value))})


def register(values: Iterable[str]) -> None:
    """Values that are secret although no environment variable holds them (settings: headers, `environment.env`)."""
    with _lock:
        _registered.update(value for value in values if isinstance(value, str) and maskable(value))


def registered() -> list[str]:
    """The values `register` was given (a URL's password on the command line): what a usage error's line masks."""
    with _lock:
        return list(_registered)


def _base64_forms(raw: bytes) -> set[str]:
    """The base64 text that encodes `raw` wherever it starts in a longer stream (three alignments, both alphabets)."""
    forms = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        start, end = (8 * offset + 5) // 6, (8 * (offset + len(raw))) // 6
        piece = encoded[start:end]
        forms |= {piece, piece.replace("+", "-").replace("/", "_")}
    return forms


def _forms(secret: str) -> tuple[set[str], set[str]]:
    """(forms matched as they are, encoded forms that may also be wrapped over lines)."""
    raw = secret.encode("utf-8")
    plain = {secret, secret[::-1], codecs.encode(secret, "rot13"), quote(secret, safe=""), quote_plus(secret, safe="")}
    encoded = {raw.hex(), raw.hex().upper(), *_base64_forms(raw)}
    return plain, {form for form in encoded if len(form) >= MIN_SECRET_LENGTH}


@lru_cache(maxsize=64)
def _compiled(secrets: tuple[str, ...]) -> tuple[list[str], list[str], re.Pattern[str] | None]:
    plain, wrapped = set[str](), set[str]()
    for secret in secrets:
        forms, encoded = _forms(secret)
        plain |= forms
        wrapped |= encoded
    alternatives = [re.escape(form) for form in longest_first(plain)]
    alternatives += [r"(?:\r?\n)?".join(map(re.escape, form)) for form in longest_first(wrapped)]
    pattern = re.compile("|".join(alternatives)) if alternatives else None
    return sorted(plain), sorted(wrapped), pattern


def redact(text: str, secrets: list[str] | None = None, mask: str = MASK) -> str:
    """`text` with every form of every secret replaced (all known secrets when `secrets` is None)."""
    values = tuple(known_secrets() if secrets is None else longest_first(set(secrets)))
    if not values or not text:
        return text
    plain, wrapped, pattern = _compiled(values)
    if pattern is None:
        return text
    flat = text.replace("\n", "").replace("\r", "") if wrapped else text
    if not any(form in text for form in plain) and not any(form in flat for form in wrapped):
        return text  # the usual case, at the speed of `in`
    return pattern.sub(mask, text)


class RedactingFormatter(logging.Formatter):
    """Log lines with every known secret masked."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))
