"""Regular expressions that come from outside (a trajectory's `action_regex`, a model's search pattern, a config):
compiled with the `regex` package, which matches as Python's `re` does and takes a timeout, so a pattern that
backtracks catastrophically (`(a+)+b`, `(\\w+\\s?)+$`) costs at most its time budget instead of hanging the process.

Why a timeout rather than refusing "dangerous" shapes: no syntactic rule catches every exponential pattern
(overlapping alternatives, adjacent quantifiers over the same characters) without also refusing ordinary ones; a
budget bounds them all, and the matching runs in this thread (no process to start, nothing to clean up)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import regex

from llm_ide.errors import UsageError

MAX_PATTERN_CHARS = 2000
DEFAULT_SECONDS = 2.0
Result = TypeVar("Result")


class PatternError(UsageError, ValueError):
    """A pattern refused (invalid, too long) or one that ran out of its time budget: its message is one line (a
    ValueError too, so a settings validator reports it where the config sets it)."""


class BoundedPattern:
    """A compiled pattern with a time budget shared by every match made with it."""

    def __init__(self, pattern: str, flags: int = 0, *, what: str = "pattern", seconds: float = DEFAULT_SECONDS):
        self.what = f"{what} {pattern[:80]!r}"
        if len(pattern) > MAX_PATTERN_CHARS:
            raise PatternError(f"{self.what}: longer than {MAX_PATTERN_CHARS} characters")
        try:
            self.compiled = regex.compile(pattern, flags)
        except (regex.error, TypeError, ValueError, RecursionError) as error:
            raise PatternError(f"{self.what}: not a valid regular expression ({error})") from None
        self.seconds = seconds
        self.left = seconds

    def finditer(self, text: str) -> list[regex.Match[str]]:
        return self._timed(lambda left: list(self.compiled.finditer(text, timeout=left)))

    def search(self, text: str) -> regex.Match[str] | None:
        return self._timed(lambda left: self.compiled.search(text, timeout=left))

    def _timed(self, match: Callable[[float], Result]) -> Result:
        started = time.monotonic()
        try:
            if self.left > 0:
                return match(self.left)
        except TimeoutError:
            pass
        finally:
            self.left -= time.monotonic() - started
        self.left = 0
        raise PatternError(f"{self.what}: matching took over {self.seconds:g} s (catastrophic backtracking?)")
