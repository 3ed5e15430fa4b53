"""The one secrets filter: the secrets known (the environment's, found by credentials.py's rules once per change of
the environment, not at every output; the settings' and those given in code) masked in every output (observations,
model requests and replies, logs, trajectories, preds). Masking covers the value as is, reversed, rot13'd,
URL-encoded, hex and base64 (at any alignment, wrapped over lines or not: secret_forms.py), for values of
`MIN_SECRET_LENGTH` characters or more."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from llm_ide.credentials import MASK, maskable, secret_values
from llm_ide.secret_forms import compiled
from llm_ide.text import longest_first

_registered: set[str] = set()
_lock = threading.Lock()


_environment: tuple[dict[Any, Any], tuple[str, ...]] = ({}, ())


def environment_secrets() -> tuple[str, ...]:
    """The secrets of this process's environment (credentials.secret_values), longest first, found again only when
    the environment has changed (comparing it with the copy kept is a C-level dict comparison, not a scan of every
    variable)."""
    global _environment
    current = getattr(os.environ, "_data", None) or os.environ
    kept, values = _environment
    if current != kept:  # copied only when it changed
        values = tuple(longest_first(secret_values()))
        _environment = (dict(current), values)
    return values


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


def redact(text: str, secrets: list[str] | None = None, mask: str = MASK) -> str:
    """`text` with every form of every secret replaced (all known secrets when `secrets` is None)."""
    values = tuple(known_secrets() if secrets is None else longest_first(set(secrets)))
    if not values or not text:
        return text
    plain, wrapped, pattern = compiled(values)
    if pattern is None:
        return text
    flat = text.replace("\n", "").replace("\r", "") if wrapped else text
    if not any(form in text for form in plain) and not any(form in flat for form in wrapped):
        return text  # the usual case, at the speed of `in`
    return pattern.sub(mask, text)
