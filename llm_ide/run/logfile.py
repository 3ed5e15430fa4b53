"""A run's own log file: the records of its run only (runs of a batch share the logger), masked, never fatal."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from llm_ide.secrets import redact

_CURRENT_RUN: contextvars.ContextVar[object | None] = contextvars.ContextVar("llm_ide_run", default=None)


class RedactingFormatter(logging.Formatter):
    """Log lines with every known secret masked."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class QuietFileHandler(logging.FileHandler):
    """A log file that cannot be written (a full disk) loses the record, not the run: no traceback per line."""

    def handleError(self, record: logging.LogRecord) -> None:
        pass


@contextmanager
def run_log(path: Path) -> Iterator[None]:
    handler = QuietFileHandler(path, encoding="utf-8")
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    marker = object()  # runs of a batch share the logger: each log keeps only the records of its own run
    token = _CURRENT_RUN.set(marker)
    handler.addFilter(lambda record: _CURRENT_RUN.get() is marker)
    root = logging.getLogger("llm_ide")
    root.addHandler(handler)
    root.setLevel(min(root.level or logging.INFO, logging.INFO))
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()
        _CURRENT_RUN.reset(token)
