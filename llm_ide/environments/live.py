"""A command's output as it arrives, for whoever shows it live (the console's live line, a Studio client's stream, the
Python API's events): its start, its latest lines and seconds so far (told at most every `EVERY` seconds), its end."""

from __future__ import annotations

import codecs
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from llm_ide.secrets import redact

TAIL_LINES = 6  # the latest lines of output a progress event carries
EVERY = 0.2  # seconds between two output events of one command (its end is always told)
MAX_LINE = 400  # characters of one line an event carries


@dataclass(frozen=True)
class CommandProgress:
    """A command under way: `start`, `output` (its latest lines so far), `end` (with its return code)."""

    kind: Literal["start", "output", "end"]
    command: str
    seconds: float = 0.0  # since it started
    lines: tuple[str, ...] = ()  # its latest lines of output (the last one may be incomplete)
    returncode: int | None = None  # end: as the command returned (None: it did not, e.g. interrupted)
    started_at: float = 0.0  # time.time() when it started

    def as_event(self) -> dict[str, Any]:
        """The progress as a stream event (JSON) for Studio clients."""
        return {
            "event": "command",
            "kind": self.kind,
            "command": self.command,
            "seconds": round(self.seconds, 2),
            "lines": list(self.lines),
            "returncode": self.returncode,
            "started_at": self.started_at,
        }


CommandListener = Callable[[CommandProgress], None]


class Watch:
    """The `on_output` of one command: its bytes decoded as they come (UTF-8, split characters joined), its latest
    lines kept, secrets masked, a progress told to `listener` at most every EVERY seconds."""

    def __init__(self, listener: CommandListener, command: str) -> None:
        self.listener, self.command = listener, command
        self.started, self.started_at = time.monotonic(), time.time()
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.lines: deque[str] = deque([""], maxlen=TAIL_LINES + 1)
        self.told = 0.0
        self.returncode: int | None = None
        self.lock = threading.Lock()

    def __call__(self, data: bytes) -> None:
        with self.lock:
            text = self.decoder.decode(data).replace("\r\n", "\n")
            for number, piece in enumerate(text.split("\n")):
                current = piece if number else self.lines.pop() + piece
                self.lines.append(current.rsplit("\r", 1)[-1][-MAX_LINE:])  # a progress bar's \r: its latest state
            now = time.monotonic()
            if now - self.told < EVERY:
                return
            self.told = now
        self.tell("output")

    def tail(self) -> tuple[str, ...]:
        lines = list(self.lines)
        if lines and not lines[-1]:
            lines.pop()
        return tuple(redact(line) for line in lines[-TAIL_LINES:])

    def tell(self, kind: Literal["start", "output", "end"]) -> None:
        seconds = time.monotonic() - self.started
        returncode = self.returncode if kind == "end" else None
        self.listener(CommandProgress(kind, self.command, seconds, self.tail(), returncode, self.started_at))


@contextmanager
def watched(listener: CommandListener | None, command: str) -> Iterator[Watch | None]:
    """One command told to `listener` (None: nothing to tell, no Watch): its start now, its end however it ends
    (set the Watch's `returncode` when it returned)."""
    if listener is None:
        yield None
        return
    watch = Watch(listener, command)
    watch.tell("start")
    try:
        yield watch
    finally:
        watch.tell("end")
